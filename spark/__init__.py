"""A PySpark Structured Streaming access-log pipeline and data source that read from a broker.

Imports: reaches a broker over the Kafka protocol only; of Samsa, only broker.config (properties
files) and broker.security.listeners (client settings) - never the broker's internals.
"""
