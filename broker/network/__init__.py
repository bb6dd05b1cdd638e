"""The network layer: Kafka's ``SocketServer``.

:mod:`.connection_quotas` is Kafka's ``ConnectionQuotas`` (max.connections, per-IP limits and
connection creation rates, checked by the acceptor before a socket is handed to the event loop).

Imports: configuration and the protocol's framing only.
"""
