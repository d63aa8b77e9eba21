"""The one escaper: every user value that enters a search query goes through here.

Rules (RediSearch "Query syntax: tag fields", valkey-search ``TAG`` filter parsing;
shared/VALKEY_SEARCH_DIALECT.md, point 16: tag syntax is the same on both engines):
inside ``@field:{...}`` every character other than a letter or a digit may carry
meaning (``|`` OR, ``{}`` braces, ``-`` negation, ``*`` prefix, ``\\`` escape,
whitespace, quotes, ``$`` params, ``@`` field, ``:`` ...). We escape them all with a
backslash, which both engines read as "this character literally".

Scope values (thread / agent / namespace ids, tags, source) are indexed as the
user wrote them, in the TAG fields of betterdb-agent-memory's schema, so that
library and BetterDB Monitor read the same documents. Exactness is kept three ways:
the index this library creates declares its TAG fields ``CASESENSITIVE``; values
are validated so the engine stores them unchanged (no ``,``, the TAG separator, which
would split ``"a,b"`` into two values and let a filter on ``a`` see it; no leading or
trailing whitespace, which the engine trims; not empty); and every query result is
checked against the raw values before it is used (``query.item_matches``), so an
index created by another library (case-insensitive) can never widen a scope either.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata

from ..errors import ValidationError

__all__ = ["MAX_TAG_BYTES", "escape_tag", "format_number", "tag_token", "validate_tag_value"]

# Scope ids are identifiers; a bound keeps keys, hashes and logs small.
MAX_TAG_BYTES = 1024

_CONTROL = re.compile("[\x00-\x1f\x7f]")
# Values already found valid (the check is a pure function of the value): a batch of
# writes repeats its thread and agent ids. Bounded; cleared when full.
_VALID: dict[str, None] = {}
_VALID_MAX = 4096


def validate_tag_value(value: object, *, name: str) -> str:
    """Check one scope / tag value and return it unchanged.

    Raises:
        ValidationError: not a string, empty or whitespace only, holding a comma, a
            control character, outer whitespace or format characters, a trailing ``*``,
            not encodable as UTF-8, or longer than ``MAX_TAG_BYTES``.
    """
    if value.__class__ is str and value in _VALID:
        return value
    if not isinstance(value, str):
        raise ValidationError(
            f"{name} must be a string, not {type(value).__name__}",
            code="validation.type",
            details={"argument": name, "type": type(value).__name__},
        )
    if not value.strip():
        raise ValidationError(
            f"{name} must not be empty or whitespace; pass None for no {name}",
            code="validation.empty",
            details={"argument": name},
        )
    if "," in value:
        raise ValidationError(
            f"{name} must not contain a comma (the TAG separator): {value!r}",
            code="validation.comma",
            details={"argument": name},
        )
    if (
        value != value.strip()
        or unicodedata.category(value[0]) == "Cf"
        or unicodedata.category(value[-1]) == "Cf"
    ):
        raise ValidationError(
            f"{name} must not start or end with whitespace or an invisible format character "
            f"(the engine trims them, so {value!r} would share a scope with its trimmed form)",
            code="validation.whitespace",
            details={"argument": name},
        )
    if value.endswith("*"):
        raise ValidationError(
            f"{name} must not end with '*': valkey-search reads a trailing '*' in a TAG query as a "
            f"prefix wildcard even when escaped, so {value!r} would match other values",
            code="validation.wildcard",
            details={"argument": name},
        )
    if _CONTROL.search(value):
        raise ValidationError(
            f"{name} must not contain control characters: {value!r}",
            code="validation.control",
            details={"argument": name},
        )
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{name} is not valid Unicode text (lone surrogate)",
            code="validation.encoding",
            details={"argument": name},
        ) from exc
    if size > MAX_TAG_BYTES:
        raise ValidationError(
            f"{name} is {size} bytes; at most {MAX_TAG_BYTES}",
            code="validation.too_long",
            details={"argument": name, "bytes": size, "max": MAX_TAG_BYTES},
        )
    if value.__class__ is str:  # a str subclass could compare equal and still differ
        if len(_VALID) >= _VALID_MAX:
            _VALID.clear()
        _VALID[value] = None
    return value


def tag_token(value: str) -> str:
    """32 hex digits of a value's BLAKE2b-128 digest (for key names built from user values)."""
    return hashlib.blake2b(value.encode("utf-8"), digest_size=16).hexdigest()


def escape_tag(value: str) -> str:
    """Escape a validated value for use inside ``@field:{...}``.

    Every ASCII character that is not a letter or a digit gets a backslash, ``_``
    included: RediSearch rejects the lone value ``_`` as a syntax error (``@t:{_}``) and
    reads ``\\_`` as ``_`` anywhere. An allow-list, because missing one special
    character is a scope leak. Non-ASCII characters are left as they are: the query
    syntax is ASCII, and a backslash before a non-ASCII character that is not a value's
    first makes RediSearch match nothing (measured: a scope holding an emoji could then
    neither find nor forget its own memories). Control characters never get here
    (``validate_tag_value`` refuses them).
    """
    out: list[str] = []
    for ch in value:
        if ch.isalnum() or ord(ch) > 0x7F:
            out.append(ch)
        else:
            out.append("\\" + ch)
    return "".join(out)


def format_number(value: float) -> str:
    """Render a finite number for a NUMERIC range (``repr`` keeps full precision)."""
    if not math.isfinite(value):
        if value == math.inf:
            return "+inf"
        if value == -math.inf:
            return "-inf"
        raise ValidationError("NaN in a numeric filter", code="validation.nonfinite")
    return repr(float(value))
