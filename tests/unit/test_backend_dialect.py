"""``backend.dialect.search_command``: the FT.SEARCH as sent, per engine and topology."""

from __future__ import annotations

from betterdb_memory.backend.dialect import search_command
from betterdb_memory.core.dialect import Capabilities, Engine, capabilities_for

KNN = ["FT.SEARCH", "m:idx", "*=>[KNN 10 @v $vec]", "PARAMS", "2", "vec", b"x", "DIALECT", "2"]


def test_plain_server_without_timeout_rule_sends_the_query_as_built() -> None:
    assert search_command(KNN, all_shards=False, unbounded=False) == KNN


def test_all_shards_asks_for_whole_results() -> None:
    assert search_command(KNN, all_shards=True, unbounded=False) == [*KNN[:3], "ALLSHARDS", *KNN[3:]]


def test_unbounded_adds_timeout_zero_once() -> None:
    assert search_command(KNN, all_shards=False, unbounded=True) == [*KNN, "TIMEOUT", "0"]
    budgeted = [*KNN, "TIMEOUT", "500"]  # the hybrid text side's own budget is kept
    assert search_command(budgeted, all_shards=False, unbounded=True) == budgeted


def test_other_commands_pass_through() -> None:
    info = ["FT.INFO", "m:idx"]
    assert search_command(info, all_shards=True, unbounded=True) == info
    assert search_command([], all_shards=True, unbounded=True) == []


def test_only_redisearch_answers_partial_results_on_timeout() -> None:
    def caps(engine: Engine) -> Capabilities:
        return Capabilities(
            engine=engine,
            version=(1, 2, 1),
            text_fields=True,
            aggregate=True,
            filter_queries=True,
            sortby=True,
            sortby_knn_score=False,
            nocontent=True,
            aliases=False,
            resp3_map_replies=False,
        )

    assert caps("redisearch").partial_on_timeout
    assert not caps("valkey-search").partial_on_timeout


def test_valkey_search_from_1_1_takes_allshards_and_1_0_rejects_it() -> None:
    assert capabilities_for("valkey-search", (1, 2, 1)).shard_options
    assert capabilities_for("valkey-search", (1, 1, 0)).shard_options
    assert not capabilities_for("valkey-search", (1, 0, 3)).shard_options
    assert not capabilities_for("redisearch", (2, 10, 5)).shard_options
    assert not capabilities_for("unknown", (0, 0, 0)).shard_options
