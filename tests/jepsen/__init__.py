"""Jepsen-style fault testing for Samsa: a cluster in network namespaces, nemeses, a workload
after Jepsen's Kafka queue workload, and a checker over the history.

Modules: ``net`` (namespaces, bridge, iptables/tc faults), ``rig`` (ZooKeeper and brokers as
hosts), ``nemesis`` (the faults and their schedule), ``workload`` (confluent-kafka clients),
``history`` (the JSON-lines log), ``checker`` (the anomalies), ``report`` (report.html),
``runner`` (one run), ``__main__`` (the operator's command: ``python -m tests.jepsen --help``).
"""
