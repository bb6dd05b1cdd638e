"""The network layer: Kafka's ``SocketServer`` and ``RequestChannel``.

* :mod:`.acceptor`: one ``Acceptor`` per listener (accept, connection quotas, TLS handshake).
* :mod:`.connection`: ``KafkaConnection``, one per client (Kafka's ``Processor`` for one channel):
  framing, the bounded per-connection request queue, pipelining, responses in request order,
  KIP-219 muting.
* :mod:`.request_channel`: ``RequestChannel``, one frame in, one response out: header, version
  check against the handler registry, decode, the request hook, the handler, client quotas, encode.
* :mod:`.connection_quotas`: Kafka's ``ConnectionQuotas`` (max.connections, per-IP limits and
  connection creation rates, checked by the acceptor before a socket is handed to the event loop).
* :mod:`.http`: the one HTTP/1.1 server (h11 framing, limits, answers to bad input) under the
  broker's three HTTP endpoints: the web console, the schema registry and ``/metrics``.

Layers (pyproject.toml's contract): acceptor > connection > request_channel, all above the request
layer (``broker.apis``) they call and below the composition root (``broker.server``), which they
never import: what they read of the broker is a Protocol (``NetworkHost``, ``RequestHost``) that
the Broker satisfies and passes in. ``connection_quotas`` sits lower, with the services: it
imports configuration only. ``http`` sits lowest of all, beside the configuration: it imports
nothing of the broker, so the console (a tool), the registry and the metrics (services) can all
use it.
"""
