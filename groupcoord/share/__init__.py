"""Share groups (KIP-932) in the group coordinator, and the share coordinator's state.

* :mod:`.group` -- a share group and its members (``ShareGroup``, ``ShareGroupMember``);
* :mod:`.records` -- the share-group records of ``__consumer_offsets``;
* :mod:`.manager` -- ShareGroupHeartbeat / ShareGroupDescribe, session timeouts, replay;
* :mod:`.state` -- Kafka's share coordinator: share-partition state in ``__share_group_state``
  (ShareSnapshot / ShareUpdate records), written by the brokers' share partitions
  (:mod:`broker.share`) and replayed on start.
"""
