"""Configuration and admin: the broker's properties, every config's definition, and the dynamic configs.

What lives here, bottom to top (each module imports only those above it in this list):

* :mod:`.properties`: ``server.properties`` and ``--override`` read into a typed
  :class:`~.properties.BrokerConfig`, with Kafka's property names and defaults (KafkaConfig).
* :mod:`.definitions`: Kafka's ConfigDef for topic and broker configs (types, defaults shown by
  DescribeConfigs, validation with Kafka's messages, which configs are dynamic and where).
* :mod:`.password_encoder`: password configs encrypted at rest (Kafka's PasswordEncoder).
* :mod:`.dynamic`: the dynamic broker configs of KIP-226, persisted and pushed into BrokerConfig.
* :mod:`.resolution`: a config's value and its synonyms through topic override, dynamic
  per-broker, dynamic cluster default, static and default (DescribeConfigs' chain).

Imports: ``protocol/`` and ``log/`` (LogConfig) only, and cryptography for the password encoder.
Everything else in ``broker/`` may import this package; it never imports them back, so the
services it configures (security, replica manager, handlers) reach it, never the other way.
A service that needs to act on a dynamic change is handed the new values by its caller.
"""
