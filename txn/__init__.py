"""Kafka transactions (KIP-98, KIP-360, KIP-447): the transaction coordinator and its pieces.

Map of the package:

* :mod:`txn.metadata` -- ``TransactionState`` (Kafka's states and their valid previous states)
  and ``TransactionMetadata``; pure.
* :mod:`txn.transaction_log` -- ``__transaction_state`` records, byte-exact with Kafka
  (TransactionLogKey v0, TransactionLogValue v0/v1) and the id -> partition hash; pure.
* :mod:`txn.coordinator` -- ``TransactionCoordinator``: InitProducerId, AddPartitionsToTxn,
  AddOffsetsToTxn, EndTxn, timeouts, expiration; applies each record as it is written (log.coordinator_runtime).
* :mod:`txn.storage` -- the small storage interface the coordinator needs, plus an in-memory one.
* ``broker/coordinators/transactions.py`` (not here) -- that interface on the broker's partitions.
* :mod:`txn.markers` -- EndTransactionMarker control batches and small v2 batches; pure.
* :mod:`txn.producer_ids` -- durable, never-repeating producer id blocks.

The request handlers are in ``broker/apis/`` (one module per API).  Producer state and the
aborted-transaction index are the log's (``log.producer_state``, ``log.txn_index``), as in Kafka's
storage module.

Imports: log/ and protocol/; never groupcoord/ (the two coordinators are independent) nor broker/:
the broker hands the coordinator its storage and settings.
"""
