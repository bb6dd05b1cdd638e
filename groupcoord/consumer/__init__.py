"""KIP-848 consumer groups: the coordinator owns the assignment.

* :mod:`.group` -- :class:`ConsumerGroup` and :class:`ConsumerGroupMember`, the group state
  (``Empty``, ``Assigning``, ``Reconciling``, ``Stable``, ``Dead``) and member states
  (``STABLE``, ``UNREVOKED_PARTITIONS``, ``UNRELEASED_PARTITIONS``).
* :mod:`.assignors` -- the server-side assignors ``uniform`` and ``range``.
* :mod:`.reconciliation` -- Kafka's ``CurrentAssignmentBuilder``: moving a member towards its
  target assignment, revoking before assigning.
* :mod:`.records` -- the consumer-group records of ``__consumer_offsets`` (key versions 3-8).
* :mod:`.regex` -- topic regular expressions in the RE2/J syntax Kafka accepts.
* :mod:`.manager` -- :class:`ConsumerGroupManager`: ConsumerGroupHeartbeat,
  ConsumerGroupDescribe, timers, and ``replay`` of the records above.
* :mod:`.migration` -- KIP-848 online migration: conversions between classic and consumer
  groups (``group.consumer.migration.policy``), pure functions of a group.
* :mod:`.classic_members` -- :class:`ClassicMembers`: JoinGroup/SyncGroup/Heartbeat/LeaveGroup
  of classic members inside a consumer group, through the manager's write path.
"""
