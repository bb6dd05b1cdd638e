"""A Confluent-compatible Schema Registry served by the broker (or standalone against any cluster).

``schema.registry.listeners=http://127.0.0.1:8081`` turns it on (empty, the default, leaves it
off). ``schema.registry.bootstrap.servers`` names the cluster whose ``_schemas`` topic holds
the schemas (default: this broker's own advertised listener); ``schema.registry.max.request.bytes``
caps a request body (413 above it); ``schema.registry.advertised.listener`` is the URL other
registries forward writes to (default: the listener); ``schema.registry.leader.eligibility=false``
keeps a node from being elected primary (:mod:`.election`);
``schema.registry.topic.replication.factor`` (default 3, as Confluent's
``kafkastore.topic.replication.factor``) is ``_schemas``' replication factor in a cluster;
``schema.registry.kafkastore.security.protocol``, ``.sasl.mechanism``, ``.sasl.jaas.config`` and
``.ssl.truststore.location`` are how the registry's own Kafka client connects (Confluent's
``kafkastore.*``; default PLAINTEXT), for brokers whose listeners all need SASL or TLS.
``samsa schema-registry --bootstrap-server HOST:PORT`` runs the same registry as its own process
against any Kafka cluster, as Karapace does; against a SASL cluster its HTTP Basic users and
their rights are the cluster's, checked over Kafka (:mod:`.cluster_auth`).

Theory of operation: the composition root (``broker/server.py``) starts it with
:func:`.server.start_schema_registry` and stops it first on shutdown. This package imports
nothing: every broker imports it (the produce path's :mod:`.validation` is in it), and the
registry's libraries (aiokafka, h11, fastavro, jsonschema, protobuf) are loaded only by a broker
that serves it (:mod:`.server`, on ``schema.registry.listeners``) or has a topic that validates
schema ids (:mod:`.schema_ids`). It never touches broker internals
for the registry itself: the schemas live in the ``_schemas`` topic, read and written over the Kafka protocol
(:mod:`.store`), and rebuilt in memory by replaying it (:mod:`.state`), so every broker that
serves the registry sees the same schemas and a restart loses none. The one link into the
broker is :mod:`.validation`, which the produce path calls to refuse records without a
registered schema id on topics that ask for it - on every broker, a broker that does not serve
the registry reading ``_schemas`` for it. What the registry uses of the broker is the
:class:`~.host.BrokerHost` Protocol.

Layout: :mod:`.server` (the running registry), :mod:`.http` (HTTP/1.1 with h11), :mod:`.rest`
(Confluent's routes and bodies), :mod:`.service` (the operations), :mod:`.formats` (parsing Avro,
JSON Schema, Protobuf), :mod:`.compatibility` (the rules per format), :mod:`.state` and
:mod:`.store` (the topic), :mod:`.errors` (Confluent's error codes), :mod:`.validation` and
:mod:`.schema_ids` (broker-side checks), :mod:`.protobuf_text` (Protobuf ``normalize``),
:mod:`.security` and :mod:`.cluster_auth` (who may do what), :mod:`.election` (the primary),
:mod:`.json_types` (parsed JSON).
"""
