"""Argument checks at the API boundary: each raises before any I/O.

The numeric ones (``check_int``, ``check_number``, ``is_int``, ``is_number``) and the
rule for which class a bad value raises live in ``core.arguments`` and are re-exported
here; this module adds the checks of the memory model (content, tags, ``k``, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, get_args

from ..errors import ValidationError
from .arguments import check_int, check_number, is_int, is_number
from .escaping import validate_tag_value
from .models import SENSITIVITY_LEVELS, MemoryKind, Sensitivity

__all__ = [
    "MAX_CONTENT_BYTES",
    "MAX_K",
    "check_content",
    "check_distance_threshold",
    "check_importance",
    "check_int",
    "check_k",
    "check_kind",
    "check_metadata",
    "check_number",
    "check_sensitivity",
    "check_tags",
    "check_ttl",
    "is_int",
    "is_number",
]

MAX_CONTENT_BYTES = 1_000_000
MAX_K = 1000
MAX_TAGS = 64


def check_content(content: object, *, name: str = "content") -> str:
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(
                f"{name} bytes are not valid UTF-8", code="validation.encoding", details={"argument": name}
            ) from exc
    if not isinstance(content, str):
        raise ValidationError(
            f"{name} must be a string, not {type(content).__name__}",
            code="validation.type",
            details={"argument": name, "type": type(content).__name__},
        )
    # ``isspace`` stops at the first other character and ``isascii`` reads a flag: a write's
    # content is checked without copying it (``strip``) or encoding it when it is ASCII.
    if not content or content.isspace():
        raise ValidationError(
            f"{name} must not be empty", code="validation.empty", details={"argument": name}
        )
    try:
        size = len(content) if content.isascii() else len(content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{name} is not valid Unicode (lone surrogate)",
            code="validation.encoding",
            details={"argument": name},
        ) from exc
    if size > MAX_CONTENT_BYTES:
        raise ValidationError(
            f"{name} is {size} bytes; at most {MAX_CONTENT_BYTES}",
            code="validation.too_long",
            details={"argument": name, "bytes": size, "max": MAX_CONTENT_BYTES},
        )
    return content


def check_importance(value: object, *, name: str = "importance", setting: bool = False) -> float:
    return check_number(value, name, minimum=0.0, maximum=1.0, setting=setting)


def check_distance_threshold(
    value: object, *, name: str = "threshold", setting: bool = False
) -> float | None:
    """A cosine-distance ceiling (0..2, the reference's meaning: keep hits at or below it)."""
    if value is None:
        return None
    return check_number(value, name, minimum=0.0, maximum=2.0, setting=setting)


def check_k(value: object) -> int:
    return check_int(value, "k", minimum=1, maximum=MAX_K)


def check_ttl(value: object) -> float | None:
    """Seconds to live; ``None`` or ``0`` mean no expiry (the reference's meaning)."""
    if value is None:
        return None
    return check_number(value, "ttl", minimum=0.0) or None


_SENSITIVITY: dict[str, Sensitivity] = {level: level for level in SENSITIVITY_LEVELS}


def check_sensitivity(value: object) -> Sensitivity:
    level = _SENSITIVITY.get(value) if isinstance(value, str) else None
    if level is None:
        raise ValidationError(
            f"sensitivity must be one of {SENSITIVITY_LEVELS}, not {value!r}",
            code="validation.sensitivity",
            details={"argument": "sensitivity", "allowed": list(SENSITIVITY_LEVELS)},
        )
    return level


_KINDS: dict[str, MemoryKind] = {kind: kind for kind in get_args(MemoryKind)}


def check_kind(value: object) -> MemoryKind:
    kind = _KINDS.get(value) if isinstance(value, str) else None
    if kind is None:
        raise ValidationError(f"unknown kind {value!r}", code="validation.kind", details={"argument": "kind"})
    return kind


def check_sensitivities(values: Iterable[object] | None) -> tuple[Sensitivity, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    return tuple(check_sensitivity(v) for v in values)


def check_tags(tags: object, *, name: str = "tags") -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise ValidationError(
            f"{name} must be a list of strings", code="validation.type", details={"argument": name}
        )
    out = tuple(dict.fromkeys(validate_tag_value(t, name=name) for t in tags))
    if len(out) > MAX_TAGS:
        raise ValidationError(
            f"at most {MAX_TAGS} {name}",
            code="validation.too_many",
            details={"argument": name, "max": MAX_TAGS},
        )
    return out


def check_metadata(metadata: object) -> dict[str, Any]:
    import json

    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValidationError(
            "metadata must be a mapping", code="validation.type", details={"argument": "metadata"}
        )
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"metadata must be JSON-serialisable: {exc}",
            code="validation.metadata",
            details={"argument": "metadata"},
        ) from exc
    return dict(metadata)
