"""Samsa's group coordinator: Kafka's classic consumer-group protocol and committed offsets.

* :mod:`groupcoord.coordinator` -- :class:`GroupCoordinator`, the single owner of group state:
  lifecycle, ``replay()`` dispatch, describe/list/delete. As Kafka's ``GroupCoordinatorShard``,
  it holds its managers as fields and delegates: :mod:`groupcoord.classic`
  (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), :mod:`groupcoord.consumer` (KIP-848),
  :mod:`groupcoord.share` (KIP-932) and :mod:`groupcoord.offsets`
  (OffsetCommit/OffsetFetch/TxnOffsetCommit/OffsetDelete, retention), each constructed with
  what it needs from :mod:`groupcoord.shard` (partition ownership, the write path).
* :mod:`groupcoord.config` -- the broker properties it reads.
* :mod:`groupcoord.group` / :mod:`groupcoord.state` -- a group's members and its state machine.
* :mod:`groupcoord.records` -- the ``__consumer_offsets`` record schemas and partitioning.
* :mod:`groupcoord.storage` -- the small log interface the coordinator writes through.
* :mod:`groupcoord.timer` -- real (asyncio) and manual (tests) clocks and timers.

Nothing here opens sockets; ``broker/apis/*`` translate requests into coordinator calls.

Imports: log/ and protocol/; never txn/ (the two coordinators are independent) nor broker/.
"""
