"""Partition storage in Kafka's shape: segments, sparse indexes, producer state, log manager.

See :mod:`log.log` for the theory of operation. Public API::

    LogConfig, Log, AppendInfo, ReadInfo, LogManager, LogSegment, OffsetIndex, TimeIndex,
    ProducerStateManager, check_log

Imports: protocol/ only (pyproject.toml's layers contract): a log knows nothing of the broker,
the coordinators or the cluster.
"""

from .check import check_log
from .config import LogConfig
from .index import OffsetIndex, TimeIndex
from .log import AppendInfo, Log, parse_topic_partition
from .manager import LogManager
from .producer_state import ProducerStateManager
from .segment import LogSegment, ReadInfo

__all__ = [
    "AppendInfo",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "ProducerStateManager",
    "ReadInfo",
    "TimeIndex",
    "check_log",
    "parse_topic_partition",
]
