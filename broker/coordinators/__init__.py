"""The coordinators' glue to the replica manager (Kafka's ``CoordinatorPartitionWriter`` and
``CoordinatorLoader``), and the typed builders the composition root calls.

The coordinators (``groupcoord/``, ``txn/``, the share coordinator in ``groupcoord/share/``)
know nothing of the broker: each is handed a small storage interface. Here those interfaces
are implemented on the broker's own internal topics through :class:`~.partition_writer.CoordinatorPartitionWriter`
(append with acks=all, applying the records once when they are in the leader's log) and
:class:`~.partition_writer.CoordinatorLoader` (read a partition back for ``replay()``), and each
coordinator is told when this broker gains or loses the leadership of its partitions.

Imports: the replica manager, the cluster's inter-broker channel (through a Protocol), the
coordinators, ``broker.share`` and ``protocol/``; never the request layer or the server.
"""
