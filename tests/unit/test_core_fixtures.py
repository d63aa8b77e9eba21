"""Loader for ``tests/fixtures/search_replies.json``: real replies, decoded as the client would.

The fixture file keeps the capture's encoding (``{simple}``, ``{error}``, ``{map}``,
``{double}``, ``{bytes_b64}``; see ``tests/fixtures/README.md``). ``reply()`` turns one
reply into what ``valkey`` hands the library: every string as ``bytes``
(``decode_responses=False``) or ``str`` (``decode_responses=True``), RESP3 maps as
``dict``, doubles as ``float``, binary as ``bytes`` and an error reply as the
``ResponseError`` the client raises. The other ``test_core_*`` modules import these
helpers; the tests here pin the decoding itself.
"""

from __future__ import annotations

import base64
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from valkey.exceptions import ResponseError

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "search_replies.json"

REDISEARCH = ("redisearch-2.10.5/resp2", "redisearch-2.10.5/resp3")
VALKEY_SEARCH = ("valkey-search-1.2.1-dev/resp2", "valkey-search-1.2.1-dev/resp3")
CAPTURES = REDISEARCH + VALKEY_SEARCH
# The memory-schema captures (``mem_*`` replies; tests/fixtures/README.md): the embedded engine
# and the valkey-search 1.2.1 release, captured by scripts/capture_search_replies.py.
MEM_REDISEARCH = ("redisearch-2.10.5-embedded/resp2", "redisearch-2.10.5-embedded/resp3")
MEM_VALKEY_SEARCH = ("valkey-search-1.2.1/resp2", "valkey-search-1.2.1/resp3")
MEM_CAPTURES = MEM_REDISEARCH + MEM_VALKEY_SEARCH
# The same schema on a 3-primary valkey-search cluster (coordinator on), asked of one node.
CLUSTER_CAPTURES = ("valkey-search-1.2.1-cluster/resp2", "valkey-search-1.2.1-cluster/resp3")
CLUSTER_REPLIES = (
    "mem_hello",
    "mem_cluster_create",
    "mem_cluster_info_local",
    "mem_cluster_info_primary",
    "mem_cluster_info_cluster",
    "mem_cluster_list",
    "mem_cluster_filter_count",
    "mem_cluster_knn_hybrid",
    "mem_cluster_dropindex",
)
MEM_REPLIES = (
    "mem_hello",
    "mem_module_list",
    "mem_info_modules",
    "mem_info_search",
    "mem_create",
    "mem_create_again",
    "mem_create_nocase",
    "mem_list",
    "mem_info",
    "mem_info_nocase",
    "mem_filter_sorted",
    "mem_filter_count",
    "mem_knn_hybrid",
    "mem_knn_sortby_score",
    "mem_tag_case_sensitive",
    "mem_tag_exact_case",
    "mem_tag_case_insensitive",
    "mem_tag_separator",
    "mem_text",
    "mem_tag_escaped_trailing_star",
    "mem_tag_escaped_star_alone",
    "mem_info_unknown",
    "mem_search_unknown",
    "mem_unknown_field",
    "mem_syntax_error",
    "mem_wrong_blob",
    "mem_dropindex",
)
KNN_REPLIES = (
    "knn_pure_return",
    "knn_pure_nocontent",
    "knn_pure_full",
    "knn_tag_filter",
    "knn_tag_escaped",
    "knn_tag_numeric",
    "knn_negation",
    "knn_sortby_score",
    "knn_limit",
    "knn_no_dialect",
)


@cache
def _load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def capture(name: str) -> dict[str, Any]:
    """One engine/protocol capture: ``engine``, ``version``, ``protocol``, ``replies``."""
    cap: dict[str, Any] = _load()["captures"][name]
    return cap


def raw(capture_name: str, reply_name: str) -> Any:
    """A reply in the fixture's JSON encoding, undecoded."""
    return capture(capture_name)["replies"][reply_name]["reply"]


def decode(node: Any, *, text: bool) -> Any:
    """Decode one JSON-encoded reply as the valkey client would (``text`` = decode_responses)."""
    if isinstance(node, dict):
        if "simple" in node:
            return node["simple"] if text else node["simple"].encode()
        if "error" in node:
            return ResponseError(node["error"])
        if "map" in node:
            return {decode(k, text=text): decode(v, text=text) for k, v in node["map"]}
        if "double" in node:
            return float(node["double"])
        if "bytes_b64" in node:
            return base64.b64decode(node["bytes_b64"])
        raise AssertionError(f"unknown encoding {sorted(node)}")
    if isinstance(node, list):
        return [decode(v, text=text) for v in node]
    if isinstance(node, str):
        return node if text else node.encode()
    return node


def reply(capture_name: str, reply_name: str, *, text: bool = False) -> Any:
    """A reply as the client hands it over (an error reply comes back as a ResponseError)."""
    return decode(raw(capture_name, reply_name), text=text)


def error_text(capture_name: str, reply_name: str) -> str | None:
    """The server's error text if that reply is an error, else None."""
    node = raw(capture_name, reply_name)
    return node["error"] if isinstance(node, dict) and "error" in node else None


# -- the fixture file and the decoder ----------------------------------------------------


def test_fixture_holds_the_engine_protocol_captures() -> None:
    """Both engines over both protocols, twice (original and memory schema), engine/version/protocol recorded."""
    assert set(_load()["captures"]) == set(CAPTURES) | set(MEM_CAPTURES) | set(CLUSTER_CAPTURES)
    assert [
        (capture(c)["engine"], capture(c)["version"], capture(c)["protocol"]) for c in CAPTURES + MEM_CAPTURES
    ] == [
        ("redisearch", "2.10.5", 2),
        ("redisearch", "2.10.5", 3),
        ("valkey-search", "1.2.1", 2),
        ("valkey-search", "1.2.1", 3),
    ] * 2
    assert [(capture(c)["engine"], capture(c)["protocol"]) for c in CLUSTER_CAPTURES] == [
        ("valkey-search", 2),
        ("valkey-search", 3),
    ]
    for name in CLUSTER_CAPTURES:
        assert set(capture(name)["replies"]) == set(CLUSTER_REPLIES)


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_every_memory_schema_capture_holds_the_same_replies(capture_name: str) -> None:
    """Each memory-schema capture has exactly the ``mem_*`` replies (beside the filter sequence's
    ``flt_*``: test_core_filter_fixtures.py), and none of them is a raw path."""
    assert {r for r in capture(capture_name)["replies"] if not r.startswith("flt_")} == set(MEM_REPLIES)
    assert "/lib" not in json.dumps(capture(capture_name)["replies"])


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_memory_schema_captures_speak_the_protocol_they_claim(capture_name: str) -> None:
    """HELLO answered with the capture's protocol: a map under RESP3, an array under RESP2."""
    hello = reply(capture_name, "mem_hello", text=True)
    fields = hello if isinstance(hello, dict) else dict(zip(hello[::2], hello[1::2], strict=True))
    assert fields["proto"] == capture(capture_name)["protocol"]
    assert isinstance(hello, dict) is (capture(capture_name)["protocol"] == 3)


@pytest.mark.parametrize("capture_name", CAPTURES)
def test_every_capture_holds_the_replies_the_tests_use(capture_name: str) -> None:
    """Each capture has the same named replies (module probes, FT.INFO, KNN, errors)."""
    needed = {
        "module_list",
        "info_modules",
        "list",
        "info",
        "create_again",
        *KNN_REPLIES,
        "unknown_index",
        "info_unknown",
        "dropindex_dd",
        "dropindex_unknown",
        "wrong_blob",
        "syntax_error",
        "unknown_field",
        "unused_param",
        "param_in_filter",
        "pure_filter",
        "match_all",
    }
    assert needed <= set(capture(capture_name)["replies"])


def test_decode_simple_string_is_bytes_or_str_by_decode_responses() -> None:
    """``{simple}`` and bulk strings become bytes by default, str with decode_responses."""
    assert decode({"simple": "OK"}, text=False) == b"OK"
    assert decode({"simple": "OK"}, text=True) == "OK"
    assert decode(["m:4", 3], text=False) == [b"m:4", 3]
    assert decode(["m:4", 3], text=True) == ["m:4", 3]


def test_decode_map_double_binary_and_error() -> None:
    """RESP3 map -> dict, double -> float, binary -> bytes (both modes), error -> ResponseError."""
    assert decode({"map": [[{"simple": "a"}, {"double": "0.5"}]]}, text=True) == {"a": 0.5}
    assert decode({"map": [["a", 1]]}, text=False) == {b"a": 1}
    assert decode({"bytes_b64": "AAAAAA=="}, text=True) == b"\x00\x00\x00\x00"
    err = decode({"error": "Unknown index name"}, text=True)
    assert isinstance(err, ResponseError)
    assert str(err) == "Unknown index name"


def test_redisearch_resp3_knn_reply_is_a_map_and_valkey_search_resp3_an_array() -> None:
    """The captured shapes behind difference 2 of the dialect notes."""
    assert isinstance(reply("redisearch-2.10.5/resp3", "knn_pure_return"), dict)
    assert isinstance(reply("valkey-search-1.2.1-dev/resp3", "knn_pure_return"), list)
