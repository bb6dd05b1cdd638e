"""Kafka's wire protocol without I/O: framing, request headers, the request/response registry
over kafka-python's message classes, record batches, varints, error codes.

Imports: the standard library, kafka-python's ``kafka.protocol``/``kafka.codec`` and crc32c;
nothing of Samsa. Everything else may import it (the bottom layer of pyproject.toml's contract).
"""
