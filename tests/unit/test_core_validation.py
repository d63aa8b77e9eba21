"""API-boundary checks (validation.py) and the vector / field codecs (codec.py)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from betterdb_memory.core.codec import (
    as_text,
    decode_vector,
    encode_vector,
    join_tags,
    split_tags,
    to_float,
    to_int,
    validate_vector,
)
from betterdb_memory.core.models import SENSITIVITY_LEVELS
from betterdb_memory.core.validation import (
    MAX_CONTENT_BYTES,
    MAX_K,
    MAX_TAGS,
    check_content,
    check_distance_threshold,
    check_importance,
    check_k,
    check_metadata,
    check_sensitivities,
    check_sensitivity,
    check_tags,
    check_ttl,
)
from betterdb_memory.errors import ValidationError

NAN, INF = float("nan"), float("inf")


def _code(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ValidationError) as info:
        fn(*args, **kwargs)
    return info.value.code


# -- content ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("", "validation.empty"),
        ("  \n\t ", "validation.empty"),
        (b"   ", "validation.empty"),
        (None, "validation.type"),
        (42, "validation.type"),
        (["text"], "validation.type"),
        (b"\xff\xfe not utf-8", "validation.encoding"),
        ("lone \ud800 surrogate", "validation.encoding"),
        ("x" * (MAX_CONTENT_BYTES + 1), "validation.too_long"),
        ("é" * (MAX_CONTENT_BYTES // 2 + 1), "validation.too_long"),  # bytes, not characters
        (b"x" * (MAX_CONTENT_BYTES + 1), "validation.too_long"),
    ],
    ids=["empty", "whitespace", "bytes-whitespace", "none", "int", "list", "bad-utf8", "surrogate",
         "over-1MB", "over-1MB-multibyte", "bytes-over-1MB"],
)  # fmt: skip
def test_check_content_rejects(value: object, code: str) -> None:
    """Empty, whitespace, non-str, invalid UTF-8 or over 1 MB: refused with a specific code."""
    with pytest.raises(ValidationError) as info:
        check_content(value)
    assert info.value.code == code
    assert info.value.details["argument"] == "content"


def test_check_content_accepts_text_and_utf8_bytes() -> None:
    """str passes unchanged; UTF-8 bytes are decoded; exactly 1 MB is allowed."""
    assert check_content("  hello ") == "  hello "
    assert check_content("héllo".encode()) == "héllo"
    assert len(check_content("x" * MAX_CONTENT_BYTES)) == MAX_CONTENT_BYTES
    assert MAX_CONTENT_BYTES == 1_000_000


# -- numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "code"),
    [(NAN, "validation.nonfinite"), (INF, "validation.nonfinite"), (-INF, "validation.nonfinite"),
     (-0.01, "validation.range"), (1.01, "validation.range"), (True, "validation.type"),
     ("0.5", "validation.type"), (None, "validation.type")],
)  # fmt: skip
def test_check_importance_rejects(value: object, code: str) -> None:
    """Importance is a finite number within 0..1 (bools and strings are not numbers)."""
    assert _code(check_importance, value) == code


@pytest.mark.parametrize("value", [0, 1, 0.5, 0.0, 1.0])
def test_check_importance_accepts_0_to_1(value: float) -> None:
    """Bounds included; the result is a float."""
    out = check_importance(value)
    assert out == value and isinstance(out, float)


@pytest.mark.parametrize(
    ("value", "code"),
    [(NAN, "validation.nonfinite"), (INF, "validation.nonfinite"), (-0.1, "validation.range"),
     (2.5, "validation.range"), (False, "validation.type"), ("high", "validation.type")],
)  # fmt: skip
def test_check_threshold_rejects(value: object, code: str) -> None:
    """A threshold is a cosine distance within 0..2 (the reference's meaning)."""
    assert _code(check_distance_threshold, value) == code


def test_check_threshold_accepts_none_and_range() -> None:
    """None means the default; both bounds and 1.5 are valid distances."""
    assert check_distance_threshold(None) is None
    assert check_distance_threshold(0) == 0.0
    assert check_distance_threshold(1.5) == 1.5
    assert check_distance_threshold(2) == 2.0


@pytest.mark.parametrize(
    ("value", "code"),
    [(0, "validation.range"), (-1, "validation.range"), (MAX_K + 1, "validation.range"),
     (10**12, "validation.range"), (True, "validation.type"), (5.0, "validation.type"),
     ("5", "validation.type"), (None, "validation.type")],
)  # fmt: skip
def test_check_k_rejects(value: object, code: str) -> None:
    """k is an int within 1..MAX_K; bool, float and str are refused."""
    assert _code(check_k, value) == code


def test_check_k_accepts_bounds() -> None:
    """1 and MAX_K are allowed."""
    assert (check_k(1), check_k(MAX_K)) == (1, MAX_K)


@pytest.mark.parametrize(
    ("value", "code"),
    [(-0.5, "validation.range"), (-5, "validation.range"), (NAN, "validation.nonfinite"),
     (INF, "validation.nonfinite"), (True, "validation.type"), ("60", "validation.type")],
)  # fmt: skip
def test_check_ttl_rejects(value: object, code: str) -> None:
    """A TTL is a non-negative, finite number of seconds."""
    assert _code(check_ttl, value) == code


def test_check_ttl_accepts_none_and_positive() -> None:
    """None and 0 = no expiry (the reference's meaning); fractions of a second are fine."""
    assert check_ttl(None) is None
    assert check_ttl(0) is None
    assert check_ttl(0.5) == 0.5
    assert check_ttl(86400) == 86400.0


# -- sensitivity, tags, metadata --------------------------------------------------------------


@pytest.mark.parametrize("value", SENSITIVITY_LEVELS)
def test_check_sensitivity_accepts_the_levels(value: str) -> None:
    """none / low / pii / sensitive."""
    assert check_sensitivity(value) == value


@pytest.mark.parametrize("value", ["PII", "secret", "", None, 1])
def test_check_sensitivity_rejects_others(value: object) -> None:
    """Exact, lower-case level names only; allowed values in ``details``."""
    with pytest.raises(ValidationError) as info:
        check_sensitivity(value)
    assert info.value.code == "validation.sensitivity"
    assert info.value.details["allowed"] == list(SENSITIVITY_LEVELS)


def test_check_sensitivities_accepts_one_string_or_many() -> None:
    """A single level or an iterable; None is none."""
    assert check_sensitivities(None) == ()
    assert check_sensitivities("pii") == ("pii",)
    assert check_sensitivities(["pii", "sensitive"]) == ("pii", "sensitive")
    assert _code(check_sensitivities, ["pii", "bogus"]) == "validation.sensitivity"


def test_check_tags_accepts_and_deduplicates_in_order() -> None:
    """Any iterable of non-empty strings; duplicates dropped, first order kept."""
    assert check_tags(None) == ()
    assert check_tags(["b", "a", "b", "{x}|y"]) == ("b", "a", "{x}|y")
    assert check_tags(t for t in ("x", "y")) == ("x", "y")
    assert len(check_tags([f"t{i}" for i in range(MAX_TAGS)])) == MAX_TAGS


@pytest.mark.parametrize(
    ("value", "code"),
    [("single", "validation.type"), (5, "validation.type"), ([1], "validation.type"),
     ([""], "validation.empty"), (["ok", "  "], "validation.empty"), (["x" * 2000], "validation.too_long"),
     ([f"t{i}" for i in range(MAX_TAGS + 1)], "validation.too_many")],
)  # fmt: skip
def test_check_tags_rejects(value: object, code: str) -> None:
    """A bare string, non-strings, empty/whitespace, too long, or too many tags."""
    assert _code(check_tags, value) == code


def test_check_metadata_accepts_json_mappings() -> None:
    """None -> {}; a JSON-serialisable mapping is copied into a dict."""
    assert check_metadata(None) == {}
    src = {"a": [1, 2.5, None, True], "b": {"c": "é"}}
    out = check_metadata(src)
    assert out == src and out is not src


@pytest.mark.parametrize(
    ("value", "code"),
    [({"x": object()}, "validation.metadata"), ({"x": {1, 2}}, "validation.metadata"),
     ({"x": NAN}, "validation.metadata"), ({"x": INF}, "validation.metadata"),
     ({("t",): 1}, "validation.metadata"), ({"x": b"raw"}, "validation.metadata"),
     ([("a", 1)], "validation.type"), ("{}", "validation.type")],
)  # fmt: skip
def test_check_metadata_rejects_what_json_cannot_hold(value: object, code: str) -> None:
    """Non-JSON values (objects, sets, NaN, inf, bytes, tuple keys) or a non-mapping."""
    assert _code(check_metadata, value) == code


# -- vectors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ([0.1, 0.2, 0.3], "validation.vector_dimensions"),
        ([0.1] * 5, "validation.vector_dimensions"),
        ([[0.1, 0.2], [0.3, 0.4]], "validation.vector_dimensions"),
        (np.ones((1, 4)), "validation.vector_dimensions"),
        ([0.1, NAN, 0.3, 0.4], "validation.vector_nonfinite"),
        ([0.1, INF, 0.3, 0.4], "validation.vector_nonfinite"),
        ([0.1, 1e39, 0.3, 0.4], "validation.vector_nonfinite"),  # beyond float32: inf
        ([0.0, 0.0, 0.0, 0.0], "validation.vector_zero"),
        (np.zeros(4), "validation.vector_zero"),
        ("0.1,0.2,0.3,0.4", "validation.vector_type"),
        (b"\x00" * 16, "validation.vector_type"),
        (bytearray(16), "validation.vector_type"),
        (["0.1", "0.2", "0.3", "0.4"], "validation.vector_type"),
        (["a", "b", "c", "d"], "validation.vector_type"),
        ([None, 0.2, 0.3, 0.4], "validation.vector_type"),
        ([True, False, True, True], "validation.vector_type"),
        ([[0.1], [0.2, 0.3], 0.4, 0.5], "validation.vector_type"),
        ({"a": 1}, "validation.vector_type"),
        (None, "validation.vector_type"),
    ],
    ids=["short", "long", "2d", "2d-array", "nan", "inf", "float32-overflow", "zeros", "zero-array",
         "str", "bytes", "bytearray", "numeric-strings", "strings", "none-element", "bools", "ragged",
         "dict", "none"],
)  # fmt: skip
def test_validate_vector_rejects(value: object, code: str) -> None:
    """Wrong type/length, NaN/inf (also float32 overflow), all zeros: refused before any write."""
    with pytest.raises(ValidationError) as info:
        validate_vector(value, dimensions=4, name="query vector")
    assert info.value.code == code
    assert info.value.details["argument"] == "query vector"


def test_validate_vector_dimension_error_details() -> None:
    """The expected and actual shapes are in ``details``."""
    with pytest.raises(ValidationError) as info:
        validate_vector([1.0, 2.0], dimensions=4)
    assert info.value.details == {"argument": "vector", "expected": 4, "got": [2]}


@pytest.mark.parametrize(
    "value",
    [
        [1, 2, 3, 4],
        (0.5, -0.5, 0.25, 0.0),
        np.array([1, 2, 3, 4], dtype=np.int64),
        np.arange(1, 5, dtype=np.float64),
    ],
)
def test_validate_vector_accepts_numbers_as_float32(value: object) -> None:
    """Lists, tuples, int or float arrays of the right length become float32."""
    arr = validate_vector(value, dimensions=4)
    assert arr.dtype == np.float32 and arr.shape == (4,)


def test_encode_decode_round_trip() -> None:
    """FLOAT32 little-endian: 4 bytes per dimension, decoded back exactly."""
    rng = np.random.default_rng(7)
    for dims in (1, 8, 384):
        vec = validate_vector(rng.standard_normal(dims), dimensions=dims)
        blob = encode_vector(vec)
        assert len(blob) == 4 * dims
        out = decode_vector(blob)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out, vec)


def test_encode_vector_is_little_endian_float32() -> None:
    """1.0 is ``00 00 80 3f`` whatever the host byte order."""
    assert encode_vector(np.array([1.0, -2.0], dtype=np.float32)) == b"\x00\x00\x80\x3f\x00\x00\x00\xc0"
    assert encode_vector(np.array([1.0], dtype=">f4")) == b"\x00\x00\x80\x3f"


def test_decoded_vector_is_writable_copy() -> None:
    """decode_vector returns its own array, not a read-only view of the reply bytes."""
    out = decode_vector(b"\x00\x00\x80\x3f")
    out[0] = 2.0
    assert out[0] == 2.0


# -- field codecs -----------------------------------------------------------------------------


def test_as_text_handles_bytes_str_none_and_numbers() -> None:
    """Reply values as str whether the client decodes or not."""
    values = [b"x", "x", None, 3, b"\xff"]
    assert [as_text(v) for v in values] == ["x", "x", "", "3", "\ufffd"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(b"0.5", 0.5), ("2", 2.0), (3, 3.0), (None, 0.0), (b"", 0.0), ("abc", 0.0), ("nan", 0.0), ("inf", 0.0)],
)
def test_to_float_defaults_on_missing_or_bad(value: object, expected: float) -> None:
    """Missing, unparsable or non-finite stored numbers read as the default."""
    assert to_float(value) == expected
    assert math.isfinite(to_float(value))


@pytest.mark.parametrize(("value", "expected"), [(b"7", 7), ("7.9", 7), (None, 0), ("x", 0), (b"", 0)])
def test_to_int_defaults_on_missing_or_bad(value: object, expected: int) -> None:
    """Stored counters read back as int, the default when missing or unparsable."""
    assert to_int(value) == expected


def test_join_and_split_tags_round_trip() -> None:
    values = ["a", "b c", "ünï"]
    assert split_tags(join_tags(values)) == values
    assert split_tags(join_tags(values).encode()) == values
    assert split_tags(None) == [] and split_tags("") == [] and split_tags("a,,b") == ["a", "b"]


def test_a_value_found_valid_once_stays_valid_and_a_bad_one_stays_refused() -> None:
    """Valid scope values are remembered (a batch repeats them); that never lets a bad one in."""
    from betterdb_memory.core.escaping import validate_tag_value
    from betterdb_memory.errors import ValidationError

    class Sneaky(str):
        pass

    assert validate_tag_value("thread-7", name="thread_id") == "thread-7"
    assert validate_tag_value("thread-7", name="agent_id") == "thread-7"
    for bad in ("a,b", "tab\there", " padded", "wild*", "", Sneaky("a,b")):
        for _ in range(2):
            try:
                validate_tag_value(bad, name="thread_id")
            except ValidationError:
                continue
            raise AssertionError(f"{bad!r} was accepted")


def test_validate_vector_copies_a_float32_array_and_refuses_big_endian_nan() -> None:
    """The float32 shortcut (no error state, no conversion) still copies; other dtypes convert."""
    given = np.ones(4, dtype=np.float32)
    out = validate_vector(given, dimensions=4)
    assert not np.shares_memory(out, given) and out.dtype == np.float32
    swapped = np.array([1.0, 2.0, 3.0, 4.0], dtype=">f4")
    assert validate_vector(swapped, dimensions=4).dtype == np.float32
    with pytest.raises(ValidationError) as info:
        validate_vector(np.array([1.0, np.nan, 0.0, 0.0], dtype=">f4"), dimensions=4)
    assert info.value.code == "validation.vector_nonfinite"
    with pytest.raises(ValidationError) as info:
        validate_vector(np.array([-0.0, 0.0, -0.0, 0.0], dtype=np.float32), dimensions=4)
    assert info.value.code == "validation.vector_zero"


def test_check_content_whitespace_and_size_as_strip_and_encode_say() -> None:
    """The shortcuts (``isspace``, ``isascii``) agree with ``strip`` / ``encode`` on every case."""
    for code in range(0x3100):
        text = chr(code) * 2
        if 0xD800 <= code < 0xE000:
            continue
        if not text.strip():
            with pytest.raises(ValidationError) as info:
                check_content(text)
            assert info.value.code == "validation.empty"
        else:
            assert check_content(text) == text
    with pytest.raises(ValidationError) as info:
        check_content("é" * 500_001)  # 500,001 characters, 1,000,002 bytes
    assert info.value.code == "validation.too_long"
    assert check_content("a" * 1_000_000)
    with pytest.raises(ValidationError) as info:
        check_content("a\ud800")
    assert info.value.code == "validation.encoding"


@pytest.mark.parametrize(
    ("values", "code"),
    [
        ([1.0, np.nan, 0.5, 0.5], "validation.vector_nonfinite"),
        ([np.inf, -np.inf, 0.5, 0.5], "validation.vector_nonfinite"),
        ([-np.inf, 1.0, 1.0, 1.0], "validation.vector_nonfinite"),
        ([0.0, -0.0, 0.0, 0.0], "validation.vector_zero"),
        ([3e38, -3e38, 3e38, 1.0], None),  # float32 squares would overflow
        ([1e-45, 0.0, 0.0, 0.0], None),  # a subnormal: its float32 square underflows to 0
        ([0.25, -0.5, 1.0, 2.0], None),
    ],
    ids=["nan", "both-infs", "minus-inf", "zeros", "huge", "subnormal", "plain"],
)
def test_validate_vector_one_sum_of_squares_for_a_float32_array(
    values: list[float], code: str | None
) -> None:
    """A float32 array of the right length is checked by one sum of squares: the same verdicts as the
    checks every other input gets (the same values as a list), with no numpy warning (warnings are errors here)."""
    given = np.array(values, dtype=np.float32)
    if code is None:
        out = validate_vector(given, dimensions=4)
        assert out.tolist() == given.tolist() and not np.shares_memory(out, given)
        assert validate_vector(given.tolist(), dimensions=4).tolist() == out.tolist()
        return
    for form in (given, given.tolist()):
        with pytest.raises(ValidationError) as info:
            validate_vector(form, dimensions=4)
        assert info.value.code == code
