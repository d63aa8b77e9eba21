"""Engine detection and FT.INFO parsing on real replies of both engines, both protocols.

``probe`` is tested with a tiny fake client: what is under test is its order of
questions (MODULE LIST + INFO modules -> FT._LIST / FT.INFO), which is pure control
flow, not storage. RediSearch 8.x is not on this machine: its replies are the captured
RediSearch 2.10.5 ones with the version numbers of 8.0.2, which is exactly the point
(the engines must be told apart by what they report beyond the number).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import valkey.exceptions as vexc
from valkey._parsers.helpers import parse_info  # the callback the client applies to INFO

from betterdb_memory.backend.dialect import keyless_route, probe
from betterdb_memory.core.codec import normalize_reply
from betterdb_memory.core.dialect import (
    Capabilities,
    capabilities_for,
    engine_from_ft_info,
    engine_from_info,
    identify_engine,
    module_version,
    parse_info_modules,
    parse_module_list,
)
from betterdb_memory.core.ft_info import IndexField, parse_ft_info, parse_index_schema
from betterdb_memory.errors import ConfigurationError, ServerError, classify_server_error
from tests.unit.test_core_fixtures import (
    CAPTURES,
    CLUSTER_CAPTURES,
    MEM_CAPTURES,
    MEM_REDISEARCH,
    MEM_VALKEY_SEARCH,
    REDISEARCH,
    VALKEY_SEARCH,
    capture,
    reply,
)

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


def test_only_redisearch_is_trusted_with_the_index_s_ef_runtime() -> None:
    """Every KNN names its EF except on RediSearch (valkey-search's fan-out walks with EF = K)."""
    assert not capabilities_for("redisearch", (2, 10, 5)).knn_names_ef
    assert capabilities_for("valkey-search", (1, 2, 1)).knn_names_ef
    assert capabilities_for("unknown", (0, 0, 0)).knn_names_ef


def test_unknown_engine_gets_the_smallest_dialect() -> None:
    """Unknown engine: the valkey-search 1.0 capability set (KNN-only queries)."""
    unknown = capabilities_for("unknown", (0, 0, 0))
    assert unknown.engine == "unknown"
    assert unknown.as_list() == capabilities_for("valkey-search", (1, 0, 0)).as_list() == ["nocontent"]


# -- probe's fallback order -----------------------------------------------------------------


class FakeProbeClient:
    """Answers MODULE LIST / INFO / FT._LIST / FT.INFO <name> with a value or raises the given exception."""

    def __init__(
        self, *, module_list: Any, info: Any, ft_list: Any, more: dict[str, Any] | None = None
    ) -> None:
        self.answers = {"MODULE LIST": module_list, "INFO": info, "FT._LIST": ft_list, **(more or {})}
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


@pytest.mark.parametrize("capture_name", CAPTURES + MEM_CAPTURES)
async def test_probe_uses_module_list_alone_when_its_number_decides(capture_name: str) -> None:
    """21005 and 66049 each belong to one engine only: nothing else is asked (no INFO for ACL users)."""
    name = "mem_module_list" if capture_name in MEM_CAPTURES else "module_list"
    client = FakeProbeClient(module_list=reply(capture_name, name), info=_blocked("INFO"), ft_list=None)
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
    """MODULE LIST and INFO both refused, FT._LIST lists no index: unknown engine, valkey-search 1.0 dialect."""
    client = FakeProbeClient(
        module_list=_blocked("MODULE"),
        info=vexc.NoPermissionError("this user has no permissions to run the 'info' command"),
        ft_list=[],
    )
    with caplog.at_level(logging.WARNING, logger="betterdb_memory"):
        caps = await probe(client)
    assert caps == capabilities_for("unknown", (0, 0, 0))
    assert client.calls == ["MODULE LIST", "INFO", "FT._LIST"]
    assert "assuming valkey-search 1.0 dialect" in caplog.text


@pytest.mark.parametrize("capture_name", CAPTURES)
async def test_probe_reads_an_existing_index_when_nothing_else_answers(capture_name: str) -> None:
    """MODULE LIST and INFO refused, an index exists: its FT.INFO shape names the engine."""
    client = FakeProbeClient(
        module_list=_blocked("MODULE"),
        info=_blocked("INFO"),
        ft_list=[b"idx"],
        more={"FT.INFO idx": reply(capture_name, "info")},
    )
    caps = await probe(client)
    assert caps.engine == capture(capture_name)["engine"]
    assert caps.version == (0, 0, 0)  # no version anywhere: the smallest dialect of that engine
    assert client.calls == ["MODULE LIST", "INFO", "FT._LIST", "FT.INFO idx"]


async def test_probe_module_list_without_search_then_info_without_search_asks_ft_list() -> None:
    """Answers that list no search module are not trusted as 'no module': FT._LIST is still asked."""
    client = FakeProbeClient(module_list=[], info={"modules": []}, ft_list=[])  # and lists no index
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


# -- telling RediSearch 8.x from valkey-search: beyond the version number -------------------


def _renumber(value: Any, old: int, new: int, texts: tuple[tuple[str, str], ...] = ()) -> Any:
    """A decoded reply with module version ``old`` replaced by ``new`` (and text replacements)."""
    pairs = ((f"ver={old}", f"ver={new}"), *texts)
    if isinstance(value, bytes):
        for a, b in pairs:
            value = value.replace(a.encode(), b.encode())
        return value
    if isinstance(value, str):
        for a, b in pairs:
            value = value.replace(a, b)
        return value
    if isinstance(value, list):
        return [new if v == old else _renumber(v, old, new, texts) for v in value]
    if isinstance(value, dict):
        return {k: new if v == old else _renumber(v, old, new, texts) for k, v in value.items()}
    return value


def _as_redisearch_8(value: Any) -> Any:
    """A captured RediSearch 2.10.5 reply as RediSearch 8.0.2 would send it (module ver 80002)."""
    return _renumber(value, 21005, 80002, (("search_version:2.10.5", "search_version:8.0.2"),))


@pytest.mark.parametrize(
    ("ver", "expected"),
    [
        (21005, ("redisearch", (2, 10, 5))),  # RediSearch 2.x-6.x: below 65536, no valkey-search there
        (60400, ("redisearch", (6, 4, 0))),
        (66049, ("valkey-search", (1, 2, 1))),  # valkey-search 1.x: 0x010000 .. 69999, no RediSearch there
        (0x010300, ("valkey-search", (1, 3, 0))),
        (80002, ("unknown", (0, 0, 0))),  # RediSearch 8.0.2, or valkey-search 1.56.130: undecided
        (0x020000, ("unknown", (0, 0, 0))),  # valkey-search 2.0.0, or RediSearch 13.10.72
    ],
)
def test_version_number_alone_decides_only_where_one_engine_can_have_it(
    ver: int, expected: tuple[str, tuple[int, int, int]]
) -> None:
    """The number is trusted only outside the range both encodings share (RediSearch >= 7)."""
    assert identify_engine(ver) == expected


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_engine_from_info_search_fields(capture_name: str, text: bool) -> None:
    """INFO search: RediSearch states search_version; valkey-search has fields of its own and no version."""
    found = engine_from_info(reply(capture_name, "mem_info_search", text=text))
    if capture(capture_name)["engine"] == "redisearch":
        assert found == ("redisearch", (2, 10, 5))
    else:
        assert found == ("valkey-search", None)


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_engine_from_info_reads_the_clients_parsed_dict(capture_name: str) -> None:
    """``client.info("modules")`` hands a dict; the same fields decide."""
    body = reply(capture_name, "mem_info_modules", text=True).removeprefix("txt:")
    assert engine_from_info(parse_info(body)) == engine_from_info(body)
    assert engine_from_info(parse_info(body)) is not None


def test_engine_from_info_without_either_engines_fields_is_none() -> None:
    """No search section at all (only lua, or a bare server): no evidence."""
    assert engine_from_info("# Modules\r\nmodule:name=lua,ver=1,api=1\r\n") is None
    assert engine_from_info({}) is None


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
async def test_probe_tells_redisearch_8_from_valkey_search_by_info(capture_name: str) -> None:
    """Module ver 80002 (RediSearch 8.0.2) with RediSearch's INFO: redisearch 8.0.2, every capability.

    The same number with valkey-search's INFO fields would be valkey-search: the fields
    decide, not the number.
    """
    engine = capture(capture_name)["engine"]
    module_list = reply(capture_name, "mem_module_list")
    body = reply(capture_name, "mem_info_modules", text=True).removeprefix("txt:")
    if engine == "redisearch":
        module_list, body = _as_redisearch_8(module_list), _as_redisearch_8(body)
    else:  # a future valkey-search whose number is in the shared range: 1.56.130 == 80002
        module_list, body = _renumber(module_list, 66049, 80002), _renumber(body, 66049, 80002)
    assert module_version(module_list) == 80002
    caps = await probe(FakeProbeClient(module_list=module_list, info=parse_info(body), ft_list=None))
    if engine == "redisearch":
        assert (caps.engine, caps.version) == ("redisearch", (8, 0, 2))
        assert caps == capabilities_for("redisearch", (8, 0, 2))
        assert caps.sortby_knn_score and caps.resp3_map_replies
    else:
        assert (caps.engine, caps.version) == ("valkey-search", (1, 56, 130))
        assert not caps.resp3_map_replies


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
async def test_probe_with_a_shared_number_and_info_blocked_reads_an_index(capture_name: str) -> None:
    """Module ver 80002, INFO refused: the FT.INFO shape of an existing index decides the engine."""
    engine = capture(capture_name)["engine"]
    module_list = _renumber(
        reply(capture_name, "mem_module_list"), 21005 if engine == "redisearch" else 66049, 80002
    )
    client = FakeProbeClient(
        module_list=module_list,
        info=_blocked("INFO"),
        ft_list=reply(capture_name, "mem_list"),
        more={
            "FT.INFO cap:mem:idx": reply(capture_name, "mem_info"),
            "FT.INFO nc:mem:idx": reply(capture_name, "mem_info_nocase"),
        },
    )
    caps = await probe(client)
    assert (caps.engine, caps.version) == (
        ("redisearch", (8, 0, 2)) if engine == "redisearch" else ("valkey-search", (1, 56, 130))
    )
    assert client.calls[:3] == ["MODULE LIST", "INFO", "FT._LIST"]
    assert len(client.calls) == 4 and client.calls[3].startswith("FT.INFO ")  # one index is enough


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_parse_info_modules_uses_the_fields_not_only_the_number(capture_name: str) -> None:
    """INFO modules carries the module line and the module's sections: 80002 + search_version -> RediSearch 8."""
    body = reply(capture_name, "mem_info_modules", text=True)
    if capture(capture_name)["engine"] == "redisearch":
        assert parse_info_modules(body) == ("redisearch", (2, 10, 5))
        assert parse_info_modules(_as_redisearch_8(body)) == ("redisearch", (8, 0, 2))
    else:
        assert parse_info_modules(body) == ("valkey-search", (1, 2, 1))


def test_parse_module_list_leaves_a_shared_number_undecided() -> None:
    """MODULE LIST alone with 80002: a search module is there (not None), its engine undecided."""
    module_list = _as_redisearch_8(reply("redisearch-2.10.5-embedded/resp2", "mem_module_list"))
    assert parse_module_list(module_list) == ("unknown", (0, 0, 0))


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("capture_name", CAPTURES + MEM_CAPTURES)
def test_engine_from_ft_info_shape(capture_name: str, text: bool) -> None:
    """FT.INFO: backfill_in_progress/state -> valkey-search; percent_indexed/index_options -> RediSearch."""
    name = "mem_info" if capture_name in MEM_CAPTURES else "info"
    assert engine_from_ft_info(reply(capture_name, name, text=text)) == capture(capture_name)["engine"]
    assert (
        identify_engine(80002, ft_info=reply(capture_name, name, text=text))[0]
        == capture(capture_name)["engine"]
    )


# -- FT.INFO of the memory schema ------------------------------------------------------------

MEM_TAGS = ("threadId", "agentId", "namespace", "tags", "source")
MEM_NUMERIC = ("importance", "created_at", "last_accessed_at", "access_count")


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_parse_ft_info_of_the_memory_schema(capture_name: str, text: bool) -> None:
    """Both engines: 6 documents, ready, no failures, vector dim 8 COSINE, every field listed."""
    info = parse_ft_info(reply(capture_name, "mem_info", text=text))
    assert (info.name, info.num_docs, info.ready, info.indexing_failures) == ("cap:mem:idx", 6, True, 0)
    assert (info.dimensions, info.distance_metric) == (8, "COSINE")
    assert set(info.fields) == {"vector", "content", *MEM_TAGS, *MEM_NUMERIC}


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("case_sensitive", [True, False], ids=["CASESENSITIVE", "folded"])
@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_parse_index_schema_reports_tag_case_and_separator(
    capture_name: str, case_sensitive: bool, text: bool
) -> None:
    """Each TAG's CASESENSITIVE and SEPARATOR, each field's type, the vector's parameters, key type, prefix.

    RediSearch lists CASESENSITIVE as a bare flag (RESP2) or under ``flags`` (RESP3);
    valkey-search sends ``CASESENSITIVE "1"``/``"0"``; the parsed schema is the same.
    """
    name = "mem_info" if case_sensitive else "mem_info_nocase"
    prefix = "cap:mem:" if case_sensitive else "nc:mem:"
    schema = parse_index_schema(reply(capture_name, name, text=text))
    assert (schema.name, schema.key_type, schema.prefixes) == (f"{prefix}idx", "HASH", (prefix,))
    for tag in MEM_TAGS:
        assert schema.field(tag) == IndexField(tag, tag, "TAG", separator=",", case_sensitive=case_sensitive)
    for numeric in MEM_NUMERIC:
        field = schema.field(numeric)
        assert field is not None and (field.type, field.separator, field.case_sensitive) == (
            "NUMERIC",
            None,
            None,
        )
    text_field = schema.field("content")
    assert text_field is not None and text_field.type == "TEXT"
    vector = schema.field("vector")
    assert vector is not None
    assert (vector.type, vector.dimensions, vector.distance_metric, vector.algorithm, vector.data_type) == (
        "VECTOR",
        8,
        "COSINE",
        "HNSW",
        "FLOAT32",
    )
    assert {f.alias for f in schema.fields} == {"vector", "content", *MEM_TAGS, *MEM_NUMERIC}
    assert schema.field("nope") is None
    # valkey-search reports the HNSW's EF_RUNTIME (the captures' index has the default, 10);
    # RediSearch 2.10 does not, and needs none in the query (it applies the index's own).
    assert vector.ef_runtime == (10 if capture_name.startswith("valkey-search") else None)
    assert schema.exact_scope_tags is case_sensitive


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_parse_index_schema_sortable_only_where_reported(capture_name: str) -> None:
    """RediSearch reports created_at SORTABLE; valkey-search accepts SORTABLE and does not report it."""
    schema = parse_index_schema(reply(capture_name, "mem_info"))
    sortable = {f.alias for f in schema.fields if f.sortable}
    assert sortable == ({"created_at"} if capture(capture_name)["engine"] == "redisearch" else set())


@pytest.mark.parametrize("capture_name", CAPTURES)
def test_parse_index_schema_of_the_original_capture(capture_name: str) -> None:
    """The original capture's index: ``thread TAG`` without options is folded with separator ','."""
    schema = parse_index_schema(reply(capture_name, "info", text=True))
    assert (schema.name, schema.prefixes) == ("idx", ("m:",))
    assert schema.field("thread") == IndexField(
        "thread", "thread", "TAG", separator=",", case_sensitive=False
    )
    assert {f.alias: f.type for f in schema.fields} == {
        "vec": "VECTOR",
        "thread": "TAG",
        "imp": "NUMERIC",
        "created": "NUMERIC",
    }


def test_parse_index_schema_of_an_aliased_field_and_a_custom_separator() -> None:
    """``$.who AS who TAG SEPARATOR |`` on JSON (RediSearch's RESP2 shape): name, alias and separator kept."""
    reply_ = [
        "index_name", "j", "index_options", [],
        "index_definition", ["key_type", "JSON", "prefixes", ["j:", "k:"], "default_score", "1"],
        "attributes", [["identifier", "$.who", "attribute", "who", "type", "TAG", "SEPARATOR", "|"]],
    ]  # fmt: skip
    schema = parse_index_schema(reply_)
    assert (schema.key_type, schema.prefixes) == ("JSON", ("j:", "k:"))
    assert schema.fields == (IndexField("$.who", "who", "TAG", separator="|", case_sensitive=False),)


# -- what the memory-schema replies show about the dialects ---------------------------------


def _total_and_ids(got: Any) -> tuple[int, list[str]]:
    """A NOCONTENT FT.SEARCH reply, RESP2 array or RediSearch's RESP3 map, as (total, ids)."""
    if isinstance(got, dict):
        return got["total_results"], [r["id"] for r in got["results"]]
    return got[0], list(got[1:])


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_tag_case_folding_and_separator_as_captured(capture_name: str) -> None:
    """CASESENSITIVE keeps 'Agent-A' apart from 'agent-a'; without it both engines fold case; ',' splits tags."""
    assert _total_and_ids(reply(capture_name, "mem_tag_case_sensitive", text=True)) == (0, [])
    assert _total_and_ids(reply(capture_name, "mem_tag_exact_case", text=True))[0] == 6
    total, ids = _total_and_ids(reply(capture_name, "mem_tag_case_insensitive", text=True))
    assert total == 6 and all(i.startswith("nc:mem:") for i in ids)
    assert _total_and_ids(reply(capture_name, "mem_tag_separator", text=True)) == (
        2,
        ["cap:mem:1", "cap:mem:2"],
    )
    total, ids = _total_and_ids(reply(capture_name, "mem_text", text=True))  # TEXT: order is the engine's
    assert (total, sorted(ids)) == (2, ["cap:mem:1", "cap:mem:6"])


@pytest.mark.parametrize("capture_name", MEM_VALKEY_SEARCH)
def test_valkey_search_filter_query_sorts_and_limits(capture_name: str) -> None:
    """valkey-search 1.2: a non-KNN filter query with SORTBY created_at DESC and LIMIT 0 2 (RETURN order kept)."""
    got = reply(capture_name, "mem_filter_sorted", text=True)
    assert got[0] == 3 and got[1::2] == ["cap:mem:5", "cap:mem:3"]
    assert got[2] == ["content", "The meeting is on Friday", "importance", "0.5", "created_at", "1700000500"]
    assert reply(capture_name, "mem_filter_count") == [6]


@pytest.mark.parametrize("capture_name", MEM_VALKEY_SEARCH)
def test_valkey_search_knn_hybrid_and_sortby_score(capture_name: str) -> None:
    """Hybrid KNN answers a RESP2 array even under RESP3; SORTBY on the KNN alias is an error on 1.2."""
    got = reply(capture_name, "mem_knn_hybrid", text=True)
    assert isinstance(got, list) and got[0] == 2 and got[1::2] == ["cap:mem:3", "cap:mem:5"]
    assert isinstance(reply(capture_name, "mem_knn_sortby_score"), vexc.ResponseError)


@pytest.mark.parametrize("capture_name", MEM_REDISEARCH)
def test_redisearch_filter_query_and_knn_sortby_score(capture_name: str) -> None:
    """RediSearch 2.10: the same queries answer (a map under RESP3); SORTBY on the KNN alias works."""
    for name in ("mem_filter_sorted", "mem_knn_hybrid", "mem_knn_sortby_score"):
        got = reply(capture_name, name, text=True)
        assert isinstance(got, dict if capture(capture_name)["protocol"] == 3 else list)
    assert not isinstance(reply(capture_name, "mem_unknown_field"), vexc.ResponseError)  # empty, not an error


MEM_ERRORS = {
    "mem_create_again": "IndexExistsError",
    "mem_info_unknown": "IndexNotFoundError",
    "mem_search_unknown": "IndexNotFoundError",
    "mem_syntax_error": "QuerySyntaxError",
    "mem_unknown_field": "QuerySyntaxError",  # valkey-search only
    "mem_wrong_blob": "VectorSizeError",
    "mem_tag_escaped_star_alone": "QuerySyntaxError",  # valkey-search only
}
# Replies that are errors on valkey-search only (RediSearch answers them).
VALKEY_ONLY_ERRORS = {"mem_unknown_field", "mem_tag_escaped_star_alone"}


@pytest.mark.parametrize("name", sorted(MEM_ERRORS))
@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_memory_schema_errors_map_to_their_class(capture_name: str, name: str) -> None:
    """Every error the memory-schema sequence drew maps to its class on both engines, both protocols."""
    got = reply(capture_name, name)
    if not isinstance(got, vexc.ResponseError):
        assert name in VALKEY_ONLY_ERRORS and capture(capture_name)["engine"] == "redisearch"
        return
    cls = classify_server_error(str(got))
    assert issubclass(cls, ServerError)
    assert cls.__name__ == MEM_ERRORS[name]


# -- valkey-search cluster (coordinator): the replies one node gives for the whole cluster ---


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("capture_name", CLUSTER_CAPTURES)
def test_cluster_ft_info_local_primary_and_cluster_forms(capture_name: str, text: bool) -> None:
    """FT.INFO: LOCAL counts this shard's documents only; PRIMARY sums the primaries; CLUSTER reports backfill.

    12 documents over three shards: the node's own share is fewer, ``FT.INFO idx
    PRIMARY`` gives all 12 (as a string), ``CLUSTER`` says whether any shard backfills.
    """
    local = parse_ft_info(reply(capture_name, "mem_cluster_info_local", text=text))
    primary = parse_ft_info(reply(capture_name, "mem_cluster_info_primary", text=text))
    whole = parse_ft_info(reply(capture_name, "mem_cluster_info_cluster", text=text))
    assert 0 < local.num_docs < 12 and local.ready and local.dimensions == 8
    assert primary.num_docs == 12 and primary.name == "cap:mem:idx"
    assert whole.ready is True
    for name in ("mem_cluster_info_local", "mem_cluster_info_primary", "mem_cluster_info_cluster"):
        assert engine_from_ft_info(reply(capture_name, name, text=text)) == "valkey-search"
    schema = parse_index_schema(reply(capture_name, "mem_cluster_info_local", text=text))
    assert schema.field("threadId") == IndexField(
        "threadId", "threadId", "TAG", separator=",", case_sensitive=True
    )


@pytest.mark.parametrize("capture_name", CLUSTER_CAPTURES)
def test_cluster_queries_fan_out_from_one_node(capture_name: str) -> None:
    """A count and a hybrid KNN query sent to one node cover every shard (RESP2 arrays under RESP3 too)."""
    assert reply(capture_name, "mem_cluster_filter_count") == [12]
    got = reply(capture_name, "mem_cluster_knn_hybrid", text=True)
    assert got[0] == 4 and got[1::2] == ["cap:mem:1", "cap:mem:9", "cap:mem:7", "cap:mem:3"]
    assert reply(capture_name, "mem_cluster_list", text=True) == ["cap:mem:idx"]


async def test_keyless_route_sends_ft_commands_to_the_default_node_of_a_cluster_client() -> None:
    """ValkeyCluster: target_nodes=default-node (valkey-py 6 cannot route FT.* itself); a plain client: nothing."""
    import valkey.asyncio as avalkey
    from valkey.asyncio.cluster import ValkeyCluster

    cluster = ValkeyCluster(host="127.0.0.1", port=1)  # not connected: routing is decided client-side
    plain = avalkey.Valkey(host="127.0.0.1", port=1)
    try:
        assert keyless_route(cluster) == {"target_nodes": ValkeyCluster.DEFAULT_NODE}
        assert keyless_route(plain) == {}
    finally:
        await cluster.aclose()
        await plain.aclose()


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_escaped_trailing_star_in_a_tag_value(capture_name: str) -> None:
    """``@source:{use\\*}``: literal on RediSearch (no document's source is "use*"); on valkey-search 1.2.1
    still a prefix wildcard that matches every "user" document. ``tag_trailing_star_literal`` says which.
    """
    total, _ = _total_and_ids(reply(capture_name, "mem_tag_escaped_trailing_star", text=True))
    caps = capabilities_for(*parse_module_list(reply(capture_name, "mem_module_list")))  # type: ignore[misc]
    if capture(capture_name)["engine"] == "redisearch":
        assert total == 0 and caps.tag_trailing_star_literal is True
    else:
        assert total == 6 and caps.tag_trailing_star_literal is False  # scope-widening: "use*" matched "user"
        assert "too short for prefix wildcard" in str(reply(capture_name, "mem_tag_escaped_star_alone"))
    assert "tag_trailing_star_literal" not in caps.as_list()  # a quirk, not a published capability
