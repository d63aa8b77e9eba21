"""Backend errors -> the library's tree, on every error text the two engines really sent."""

from __future__ import annotations

import pytest
import valkey.exceptions as vexc

from betterdb_memory import errors
from betterdb_memory.backend.translate import is_connection_error, translate
from betterdb_memory.errors import (
    BetterDBMemoryError,
    CommandNotSupportedError,
    ConfigurationError,
    EmbeddingError,
    IndexExistsError,
    IndexNotFoundError,
    MemoryNotFoundError,
    QuerySyntaxError,
    ServerError,
    StoreConnectionError,
    StoreTimeoutError,
    TokenBudgetError,
    ValidationError,
    VectorSizeError,
)
from tests.unit.test_core_fixtures import CAPTURES, capture, error_text, reply

# (reply name, engine) -> the class its error text must map to. ``None`` engine = both.
# ServerError (the family root) where no finer class fits.
EXPECTED: dict[str, type[ServerError]] = {
    "create_again": IndexExistsError,  # "Index already exists" / "Index idx in database 0 already exists."
    "unknown_index": IndexNotFoundError,  # "nope: no such index" / "Index with name 'nope' not found ..."
    "info_unknown": IndexNotFoundError,  # "Unknown index name" / same valkey wording
    "dropindex_unknown": IndexNotFoundError,  # "Unknown Index name" (capital I) / valkey wording
    "syntax_error": QuerySyntaxError,  # "Syntax error at offset 12 ..." / "Invalid filter expression: ..."
    "knn_no_dialect": QuerySyntaxError,  # RediSearch: KNN under DIALECT 1
    "param_in_filter": QuerySyntaxError,  # valkey: "Invalid filter expression: ... Invalid number"
    "unknown_field": QuerySyntaxError,  # valkey: "Invalid filter expression: ... not indexed as a tag field"
    "wrong_blob": VectorSizeError,  # both: "query vector blob size (12) does not match ..."
    "unused_param": ServerError,  # valkey: "Parameter `x` not used." (never sent by the builder)
    "dropindex_dd": ServerError,  # valkey: "ERR wrong number of arguments for 'FT.DROPINDEX' command"
}

ERROR_CASES = [
    (capture_name, name)
    for capture_name in CAPTURES
    for name in capture(capture_name)["replies"]
    if error_text(capture_name, name) is not None
]


def test_every_error_in_the_fixtures_has_an_expected_class() -> None:
    """No captured error text escapes this table (a new fixture must say what it maps to)."""
    assert ERROR_CASES
    assert {name for _, name in ERROR_CASES} <= set(EXPECTED)


@pytest.mark.parametrize(("capture_name", "name"), ERROR_CASES, ids=[f"{c}:{n}" for c, n in ERROR_CASES])
def test_captured_error_translates_to_its_class(capture_name: str, name: str) -> None:
    """The server's own wording (either engine, either protocol) maps to the right class."""
    exc = reply(capture_name, name)
    assert isinstance(exc, vexc.ResponseError)
    out = translate(exc, operation="recall")
    assert type(out) is EXPECTED[name]
    assert out.code == EXPECTED[name].default_code
    assert out.details["operation"] == "recall"
    assert out.details["server_message"] == str(exc)
    assert str(exc) in out.message


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("nope: no such index", IndexNotFoundError),
        ("Unknown index name", IndexNotFoundError),
        ("Unknown Index name", IndexNotFoundError),
        ("Index with name 'nope' not found in database 0", IndexNotFoundError),
        ("Index already exists", IndexExistsError),
        ("Index idx in database 0 already exists.", IndexExistsError),
        ("Syntax error at offset 12 near t1", QuerySyntaxError),
        ("Invalid filter expression: `(@thread:{t1)`. Missing closing TAG bracket, '}'", QuerySyntaxError),
        (
            "Error parsing vector similarity parameters: query vector blob size (12) does not match",
            VectorSizeError,
        ),
        ("unknown command 'FT.SEARCH', with args beginning with: ", CommandNotSupportedError),
        ("NOPERM User app has no permissions to run the 'flushall' command", errors.PermissionDeniedError),
        ("unknown subcommand 'FOO'. Try FT.CONFIG HELP.", CommandNotSupportedError),
        ("WRONGTYPE Operation against a key holding the wrong kind of value", ServerError),
    ],
)
def test_wordings_of_both_engines_map_to_one_class(text: str, cls: type[ServerError]) -> None:
    """Both engines' wordings of one condition, matched case-insensitively, first match wins."""
    assert errors.classify_server_error(text) is cls
    assert type(translate(vexc.ResponseError(text), operation="op")) is cls


@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (
            vexc.ConnectionError("Error 111 connecting to localhost:6379. Connection refused."),
            StoreConnectionError,
        ),
        (vexc.TimeoutError("Timeout reading from socket"), StoreTimeoutError),
        (ConnectionResetError("reset by peer"), StoreConnectionError),
        (OSError("network is unreachable"), StoreConnectionError),
        (TimeoutError("timed out"), StoreTimeoutError),
    ],
)
def test_connection_and_timeout_faults_translate(exc: BaseException, cls: type[StoreConnectionError]) -> None:
    """Connection faults -> StoreConnectionError; timeouts -> StoreTimeoutError (a StoreConnectionError)."""
    out = translate(exc, operation="remember", details={"done": 3})
    assert type(out) is cls
    assert isinstance(out, StoreConnectionError)
    assert out.details == {"operation": "remember", "done": 3}


@pytest.mark.parametrize(
    "exc",
    [
        vexc.ConnectionError("refused"),
        vexc.TimeoutError("slow"),
        ConnectionResetError("reset"),
        TimeoutError(),
    ],
)
def test_connection_faults_are_recognised_for_retry(exc: BaseException) -> None:
    """The client's and the builtin connection/timeout errors count as retryable connection faults."""
    assert is_connection_error(exc) is True


def test_response_error_is_not_a_connection_error() -> None:
    """A server 'no' is never retried as a connection fault."""
    assert is_connection_error(vexc.ResponseError("Unknown index name")) is False


def test_unexpected_exception_becomes_internal_error() -> None:
    """Anything else -> the root class with code ``internal``."""
    out = translate(KeyError("x"), operation="recall")
    assert type(out) is BetterDBMemoryError
    assert out.code == "internal"
    assert "KeyError" in out.message


def test_translating_a_library_error_keeps_it_and_adds_context() -> None:
    """Already ours: same object, operation added, existing details untouched."""
    original = ValidationError(
        "bad", code="validation.empty", details={"argument": "content", "operation": "x"}
    )
    out = translate(original, operation="remember", details={"extra": 1})
    assert out is original
    assert out.details == {"argument": "content", "operation": "x", "extra": 1}


def test_caller_errors_are_value_errors() -> None:
    """ValidationError and ConfigurationError subclass ValueError (the caller got it wrong)."""
    assert issubclass(ValidationError, ValueError)
    assert issubclass(ConfigurationError, ValidationError)
    assert issubclass(ConfigurationError, ValueError)
    assert not issubclass(ServerError, ValueError)
    assert not issubclass(StoreConnectionError, ValueError)


ALL_ERRORS = [
    getattr(errors, n)
    for n in errors.__all__
    if isinstance(getattr(errors, n), type) and issubclass(getattr(errors, n), BaseException)
]


@pytest.mark.parametrize(
    "cls", [c for c in ALL_ERRORS if c is not MemoryNotFoundError], ids=lambda c: c.__name__
)
def test_every_error_carries_code_and_details(cls: type[BetterDBMemoryError]) -> None:
    """Each class has a stable default code, a details dict, and shows the code in str()."""
    err = cls("something broke")
    assert isinstance(err, BetterDBMemoryError)
    assert err.code == cls.default_code and err.code
    assert err.details == {}
    assert str(err) == f"[{err.code}] something broke"
    assert cls.__name__ in repr(err)
    custom = cls("m", code="custom.code", details={"k": 1})
    assert (custom.code, custom.details) == ("custom.code", {"k": 1})


def test_default_codes_are_unique() -> None:
    """No two classes share a default code."""
    codes = [c.default_code for c in ALL_ERRORS]
    assert len(codes) == len(set(codes)) == 17


# -- actrone-memory's names, in this tree -----------------------------------------------


def test_seed_names_sit_in_the_family_of_their_meaning() -> None:
    """EmbeddingError: the model's side failed (a server); the other two: the caller's input."""
    assert issubclass(EmbeddingError, ServerError) and not issubclass(EmbeddingError, ValueError)
    assert issubclass(MemoryNotFoundError, ValidationError) and issubclass(MemoryNotFoundError, ValueError)
    assert issubclass(TokenBudgetError, ValidationError) and issubclass(TokenBudgetError, ValueError)
    assert EmbeddingError.default_code == "embedder.failed"
    assert MemoryNotFoundError.default_code == "validation.not_found"
    # The code retrieve_context has always used for a bad budget, so no handler keyed on it breaks.
    assert TokenBudgetError.default_code == "validation.budget"


def test_seed_constructors_are_accepted() -> None:
    """actrone-memory's call forms: ``(message, details)`` and ``MemoryNotFoundError(memory_id)``."""
    emb = EmbeddingError("endpoint down", {"status": 503})
    assert (emb.code, emb.message, emb.details) == ("embedder.failed", "endpoint down", {"status": 503})
    budget = TokenBudgetError("token_budget must be > 0, got 0", details={"token_budget": 0})
    assert budget.details == {"token_budget": 0} and str(budget).startswith("[validation.budget]")
    missing = MemoryNotFoundError("m-1")
    assert missing.memory_id == "m-1"
    assert missing.details == {"memory_id": "m-1"}
    assert str(missing) == "[validation.not_found] memory 'm-1' not found"
    custom = MemoryNotFoundError("m-2", "gone", code="x.y", details={"scope": "t"})
    assert (custom.message, custom.code, custom.details) == (
        "gone",
        "x.y",
        {"memory_id": "m-2", "scope": "t"},
    )


def test_seed_names_are_exported_from_the_package() -> None:
    import betterdb_memory

    assert betterdb_memory.EmbeddingError is EmbeddingError
    assert betterdb_memory.MemoryNotFoundError is MemoryNotFoundError
    assert betterdb_memory.TokenBudgetError is TokenBudgetError


@pytest.mark.parametrize(
    "exc",
    [
        vexc.ClusterDownError("CLUSTERDOWN The cluster is down"),
        vexc.TryAgainError("TRYAGAIN Multiple keys request during rehashing of slot"),
        vexc.MasterDownError("MASTERDOWN Link with MASTER is down"),
        vexc.ResponseError("CLUSTERDOWN Hash slot not served"),
    ],
)
def test_a_cluster_that_cannot_serve_now_is_a_connection_error(exc: Exception) -> None:
    """Retried like a dropped connection, and caught as one (not a generic ServerError)."""
    assert is_connection_error(exc)
    assert isinstance(translate(exc, operation="recall"), StoreConnectionError)
