"""Shared helpers for Samsa's integration and compatibility tests.

Everything here talks to real processes over real sockets: a broker started as
a subprocess on a free loopback port, the stock clients, the Java client's jars.
Nothing here mocks Kafka.
"""
