"""Pure functions of the fallback source: offset JSON and the maxOffsetsPerTrigger split."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'samsa-broker[spark]')")

from spark.datasource import offsets_from_json, offsets_to_json, rate_limit  # noqa: E402


def test_offsets_json_round_trip_matches_connector_form() -> None:
    offsets = {("a", 0): 5, ("a", 1): 7, ("b", 0): 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}  # partitions as strings, like Spark's
    assert offsets_from_json(as_json) == offsets


def test_rate_limit_is_proportional_and_never_starves() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 51}
    end = rate_limit(start, latest, 100)
    assert end[("t", 0)] == 89  # int(100 * 900 / 1001)
    assert end[("t", 1)] == 109  # int(100 * 100 / 1001) = 9
    assert end[("t", 2)] == 51  # one-offset backlog still advances
    assert sum(end[tp] - start[tp] for tp in start) <= 100


def test_rate_limit_passes_through_when_under_limit() -> None:
    start = {("t", 0): 10}
    latest = {("t", 0): 30}
    assert rate_limit(start, latest, 100) == latest
