"""Share groups (KIP-932) on the partition leader: share-partitions and share sessions.

* :mod:`.partition` -- :class:`SharePartition`, the acquisition state machine of one group on
  one partition (Kafka's ``SharePartition``);
* :mod:`.session` -- :class:`ShareSessionCache`, the share sessions of ShareFetch /
  ShareAcknowledge (Kafka's ``ShareSessionCache``);
* :mod:`.manager` -- :class:`SharePartitionManager`: fetch, acknowledge, lock timeouts, and
  persistence through the share coordinator (:mod:`groupcoord.share.state`).

Imports: groupcoord/, log/, security, topic auto-creation and protocol/; nothing from the request
layer or above.
"""
