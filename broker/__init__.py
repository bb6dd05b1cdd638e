"""The broker: composition root (server.py), network layer (network/), request layer (apis/), the replica
manager and log dirs, the cluster (zk/, controller/, replication/, metadata_cache.py), security/,
configuration and admin (config/), metrics/ and console/, tools/.

Imports: each subpackage only from its own layer or the ones below, as pyproject.toml's
``[tool.importlinter]`` contract lists them (tests/test_layers.py runs it).
"""
