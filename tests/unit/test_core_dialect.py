"""Engine detection and FT.INFO parsing on real replies of both engines, both protocols.

``probe`` is tested with a tiny fake client: what is under test is its fallback order
(MODULE LIST -> INFO modules -> FT._LIST), which is pure control flow, not storage.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import valkey.exceptions as vexc
from valkey._parsers.helpers import parse_info  # the callback the client applies to INFO

from betterdb_memory.dialect import (
    Capabilities,
    capabilities_for,
    normalize_reply,
    parse_ft_info,
    parse_info_modules,
    parse_module_list,
    probe,
)
from betterdb_memory.errors import ConfigurationError
from tests.unit.test_core_fixtures import CAPTURES, REDISEARCH, VALKEY_SEARCH, capture, reply

EXPECTED_ENGINE = {
    "redisearch": ("redisearch", (2, 10, 5)),
    "valkey-search": ("valkey-search", (1, 2, 1)),
}


def _expected(capture_name: str) -> tuple[str, tuple[int, int, int]]:
    return EXPECTED_ENGINE[capture(capture_name)["engine"]]


# -- MODULE LIST / INFO modules -------------------------------------------------------------


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("capture_name", CAPTURES)
def test_parse_module_list_finds_engine_and_version(capture_name: str, text: bool) -> None:
    """MODULE LIST (RESP2 arrays, RESP3 maps) -> redisearch 2.10.5 (ver 21005) / valkey-search 1.2.1 (66049)."""
    assert parse_module_list(reply(capture_name, "module_list", text=text)) == _expected(capture_name)


def test_parse_module_list_without_a_search_module_is_none() -> None:
    """Only lua loaded: no engine."""
    assert parse_module_list([[b"name", b"lua", b"ver", 1, b"path", b"lua", b"args", []]]) is None
    assert parse_module_list([]) is None


@pytest.mark.parametrize("capture_name", CAPTURES)
def test_parse_info_modules_reads_the_clients_parsed_dict(capture_name: str) -> None:
    """``client.info("modules")`` hands a dict (valkey's parse_info, RESP3 'txt:' stripped)."""
    body = reply(capture_name, "info_modules", text=True).removeprefix("txt:")
    assert parse_info_modules(parse_info(body)) == _expected(capture_name)


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("capture_name", CAPTURES)
def test_parse_info_modules_reads_raw_text_with_or_without_verbatim_prefix(
    capture_name: str, text: bool
) -> None:
    """Raw INFO text, as bytes or str, with the RESP3 'txt:' verbatim prefix or without."""
    body = reply(capture_name, "info_modules", text=text)
    assert parse_info_modules(body) == _expected(capture_name)
    if isinstance(body, bytes):
        assert parse_info_modules(body.removeprefix(b"txt:")) == _expected(capture_name)
    else:
        assert parse_info_modules(body.removeprefix("txt:")) == _expected(capture_name)


def test_parse_info_modules_without_search_is_none() -> None:
    """INFO text or dict listing no search module -> None."""
    assert parse_info_modules("# Modules\r\nmodule:name=lua,ver=1,api=1\r\n") is None
    assert parse_info_modules({"modules": [{"name": "lua", "ver": 1}]}) is None
    assert parse_info_modules({}) is None


# -- FT.INFO --------------------------------------------------------------------------------


def _raw_failures(decoded: Any) -> Any:
    info = decoded if isinstance(decoded, dict) else dict(zip(decoded[::2], decoded[1::2], strict=True))
    return {normalize_reply(k): v for k, v in info.items()}["hash_indexing_failures"]


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("capture_name", REDISEARCH)
def test_parse_ft_info_redisearch(capture_name: str, text: bool) -> None:
    """RediSearch: flat ``dim``, ready from indexing/percent_indexed, failures an int on the wire."""
    decoded = reply(capture_name, "info", text=text)
    assert _raw_failures(decoded) == 1  # an integer reply
    info = parse_ft_info(decoded)
    assert info.name == "idx"
    assert info.num_docs == 20  # m:bad (7-byte vector) was dropped from the index
    assert info.dimensions == 8
    assert info.distance_metric == "COSINE"
    assert info.ready is True
    assert info.indexing_failures == 1
    assert info.fields == ("vec", "thread", "imp", "created")
    assert info.memory_bytes is not None and info.memory_bytes > 0


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("capture_name", VALKEY_SEARCH)
def test_parse_ft_info_valkey_search(capture_name: str, text: bool) -> None:
    """valkey-search: dims nested under ``index``, state/backfill, failures a string on the wire."""
    decoded = reply(capture_name, "info", text=text)
    assert _raw_failures(decoded) == ("2" if text else b"2")  # a bulk string
    info = parse_ft_info(decoded)
    assert info.name == "idx"
    assert info.num_docs == 21  # m:bad kept, minus its bad fields (difference 12)
    assert info.dimensions == 8
    assert info.distance_metric == "COSINE"
    # Captured mid-backfill: state "backfill_in_progress", backfill_in_progress "1".
    assert info.ready is False
    assert info.indexing_failures == 2
    assert info.fields == ("created", "imp", "thread", "vec")
    assert info.memory_bytes is None


def _replace_pair(flat: list[Any], key: str, value: Any) -> list[Any]:
    out = list(flat)
    idx = [normalize_reply(x) for x in out[::2]].index(key) * 2
    out[idx + 1] = value
    return out


def test_parse_ft_info_valkey_search_ready_when_state_ready() -> None:
    """valkey-search is ready once ``state`` is ``ready`` / ``backfill_in_progress`` is ``0``."""
    decoded = reply("valkey-search-1.2.1-dev/resp2", "info", text=True)
    assert parse_ft_info(_replace_pair(decoded, "state", "ready")).ready is True
    assert parse_ft_info(_replace_pair(decoded, "backfill_in_progress", "0")).ready is True


def test_parse_ft_info_redisearch_not_ready_while_indexing() -> None:
    """RediSearch is not ready while ``indexing`` is 1 or ``percent_indexed`` < 1."""
    resp3 = reply("redisearch-2.10.5/resp3", "info", text=True)
    assert parse_ft_info({**resp3, "indexing": 1}).ready is False
    assert parse_ft_info({**resp3, "percent_indexed": 0.5}).ready is False
    resp2 = reply("redisearch-2.10.5/resp2", "info", text=True)
    assert parse_ft_info(_replace_pair(resp2, "percent_indexed", "0.25")).ready is False


# -- capabilities ---------------------------------------------------------------------------


@pytest.mark.parametrize("capture_name", CAPTURES)
def test_capabilities_from_module_list(capture_name: str) -> None:
    """RediSearch 2.10.5 has every capability; valkey-search 1.2.1 lacks SORTBY-on-score, aliases, map replies."""
    caps = capabilities_for(*parse_module_list(reply(capture_name, "module_list")))  # type: ignore[misc]
    if capture(capture_name)["engine"] == "redisearch":
        assert caps.version_string == "2.10.5"
        assert caps.as_list() == [
            "text_fields",
            "aggregate",
            "filter_queries",
            "sortby",
            "sortby_knn_score",
            "nocontent",
            "aliases",
        ]
        assert caps.resp3_map_replies is True
    else:
        assert caps.version_string == "1.2.1"
        assert caps.as_list() == ["text_fields", "aggregate", "filter_queries", "sortby", "nocontent"]
        assert caps.resp3_map_replies is False


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ((1, 0, 3), ["nocontent"]),
        ((1, 1, 0), ["aggregate", "filter_queries", "nocontent"]),
        ((1, 2, 1), ["text_fields", "aggregate", "filter_queries", "sortby", "nocontent"]),
        (
            (1, 3, 0),
            ["text_fields", "aggregate", "filter_queries", "sortby", "sortby_knn_score", "nocontent"],
        ),
    ],
)
def test_valkey_search_capabilities_follow_the_version_table(
    version: tuple[int, int, int], expected: list[str]
) -> None:
    """1.0 KNN only; 1.1 aggregate + filters; 1.2 TEXT + SORTBY; 1.3 SORTBY on the KNN score."""
    assert capabilities_for("valkey-search", version).as_list() == expected


def test_unknown_engine_gets_the_smallest_dialect() -> None:
    """Unknown engine: the valkey-search 1.0 capability set (KNN-only queries)."""
    unknown = capabilities_for("unknown", (0, 0, 0))
    assert unknown.engine == "unknown"
    assert unknown.as_list() == capabilities_for("valkey-search", (1, 0, 0)).as_list() == ["nocontent"]


# -- probe's fallback order -----------------------------------------------------------------


class FakeProbeClient:
    """Answers MODULE LIST / INFO / FT._LIST with a value or raises the given exception."""

    def __init__(self, *, module_list: Any, info: Any, ft_list: Any) -> None:
        self.answers = {"MODULE LIST": module_list, "INFO": info, "FT._LIST": ft_list}
        self.calls: list[str] = []

    def _answer(self, name: str) -> Any:
        self.calls.append(name)
        value = self.answers[name]
        if isinstance(value, BaseException):
            raise value
        return value

    async def execute_command(self, *args: Any) -> Any:
        return self._answer(" ".join(args))

    async def info(self, section: str | None = None) -> Any:
        assert section == "modules"
        return self._answer("INFO")


def _blocked(command: str) -> vexc.ResponseError:
    return vexc.ResponseError(f"unknown command '{command}', with args beginning with: ")


@pytest.mark.parametrize("capture_name", CAPTURES)
async def test_probe_uses_module_list_first(capture_name: str) -> None:
    """MODULE LIST answers: nothing else is asked."""
    client = FakeProbeClient(module_list=reply(capture_name, "module_list"), info=None, ft_list=None)
    caps = await probe(client)
    assert (caps.engine, caps.version) == _expected(capture_name)
    assert client.calls == ["MODULE LIST"]


@pytest.mark.parametrize("capture_name", CAPTURES)
async def test_probe_falls_back_to_info_when_module_list_is_blocked(capture_name: str) -> None:
    """Managed services block MODULE LIST: INFO modules decides."""
    body = reply(capture_name, "info_modules", text=True).removeprefix("txt:")
    client = FakeProbeClient(module_list=_blocked("MODULE"), info=parse_info(body), ft_list=None)
    caps = await probe(client)
    assert caps == capabilities_for(*_expected(capture_name))  # type: ignore[arg-type]
    assert client.calls == ["MODULE LIST", "INFO"]


async def test_probe_assumes_smallest_dialect_when_only_ft_list_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """MODULE LIST and INFO both refused, FT._LIST answers: unknown engine, valkey-search 1.0 dialect."""
    client = FakeProbeClient(
        module_list=_blocked("MODULE"),
        info=vexc.NoPermissionError("this user has no permissions to run the 'info' command"),
        ft_list=reply("valkey-search-1.2.1-dev/resp2", "list"),
    )
    with caplog.at_level(logging.WARNING, logger="betterdb_memory"):
        caps = await probe(client)
    assert caps == capabilities_for("unknown", (0, 0, 0))
    assert client.calls == ["MODULE LIST", "INFO", "FT._LIST"]
    assert "assuming valkey-search 1.0 dialect" in caplog.text


async def test_probe_module_list_without_search_then_info_without_search_asks_ft_list() -> None:
    """Answers that list no search module are not trusted as 'no module': FT._LIST is still asked."""
    client = FakeProbeClient(module_list=[], info={"modules": []}, ft_list=[])
    caps = await probe(client)
    assert isinstance(caps, Capabilities)
    assert caps.engine == "unknown"
    assert client.calls == ["MODULE LIST", "INFO", "FT._LIST"]


async def test_probe_without_any_search_module_raises_configuration_error() -> None:
    """Nothing answers: ConfigurationError (a ValueError) carrying every attempt."""
    client = FakeProbeClient(
        module_list=_blocked("MODULE"), info=_blocked("INFO"), ft_list=_blocked("FT._LIST")
    )
    with pytest.raises(ConfigurationError) as info:
        await probe(client)
    assert info.value.code == "configuration.no_search_module"
    assert [a.split(":")[0] for a in info.value.details["attempts"]] == [
        "MODULE LIST",
        "INFO modules",
        "FT._LIST",
    ]
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "fault", [vexc.ConnectionError("Connection refused"), vexc.TimeoutError("Timeout reading from socket")]
)
async def test_probe_lets_connection_faults_through(fault: Exception) -> None:
    """A down server is not 'no search module': the connection fault propagates for retry/translation."""
    client = FakeProbeClient(module_list=fault, info=None, ft_list=None)
    with pytest.raises(type(fault)):
        await probe(client)
    assert client.calls == ["MODULE LIST"]
