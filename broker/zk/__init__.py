"""ZooKeeper for cluster mode: the local server process (``server``) used by tools and tests."""
