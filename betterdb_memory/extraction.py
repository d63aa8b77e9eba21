"""The ``FactExtractor`` seam: turns become atomic, classified long-term facts.

``parse_facts`` is deliberately forgiving, because models are. The reference
library's parser dropped every fact of a reply wrapped in a Markdown fence
(```` ```json ... ``` ````) and every fact whose keys or sensitivity were not in
exact lower case (``"Content"``, ``"PII"``). Here a reply may be fenced, wrapped in
prose, a bare list or any ``{"facts": [...]}``-like envelope; keys match case- and
style-insensitively (``topicTags``, ``Topic Tags``, ``topic_tags``); sensitivity
values too, with common synonyms. A sensitivity the parser cannot place becomes
``"sensitive"``: when unsure, fail closed, so redaction still hides it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from .core.escaping import MAX_TAG_BYTES
from .core.models import SENSITIVITY_LEVELS
from .core.turns import Turn
from .summarizers import OpenAIChat, transcript

__all__ = [
    "FACTS_SCHEMA",
    "ExtractedFact",
    "FactExtractor",
    "OpenAIFactExtractor",
    "normalise_sensitivity",
    "parse_facts",
]

MAX_FACTS = 50
MAX_FACT_CHARS = 1000
MAX_FACT_TAGS = 16


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    """One durable fact drawn from a conversation.

    Attributes:
        content: a self-contained sentence.
        sensitivity: ``none | low | pii | sensitive`` (drives redaction and erasure reviews).
        topic_tags: short keywords (stored as the memory's tags).
        importance: 0..1.
    """

    content: str
    sensitivity: str = "none"
    topic_tags: tuple[str, ...] = ()
    importance: float = 0.6


@runtime_checkable
class FactExtractor(Protocol):
    """Turns (oldest first) in, facts out; an empty list when nothing is worth keeping."""

    async def extract(self, turns: Sequence[Turn]) -> list[ExtractedFact]: ...


FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "sensitivity": {"type": "string", "enum": list(SENSITIVITY_LEVELS)},
                    "topic_tags": {"type": "array", "items": {"type": "string"}},
                    "importance": {"type": "number"},
                },
                "required": ["content", "sensitivity", "topic_tags", "importance"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n?(.*?)```", re.DOTALL)
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_ALIASES: Mapping[str, tuple[str, ...]] = {
    "content": ("content", "fact", "text", "statement", "memory"),
    "sensitivity": ("sensitivity", "sensitivity_level", "sensitivity_class", "privacy", "classification"),
    "topic_tags": ("topic_tags", "topics", "tags", "topic", "keywords"),
    "importance": ("importance", "importance_score", "salience", "score", "priority"),
}
_ENVELOPE_KEYS = ("facts", "extracted_facts", "items", "memories", "results", "data")
_SENSITIVITY_SYNONYMS: Mapping[str, str] = {
    "none": "none", "no": "none", "public": "none", "non_sensitive": "none", "nonsensitive": "none",
    "null": "none", "": "none",
    "low": "low", "minor": "low", "internal": "low",
    "pii": "pii", "personal": "pii", "personal_data": "pii", "personally_identifiable_information": "pii",
    "personal_information": "pii", "identifying": "pii",
    "sensitive": "sensitive", "high": "sensitive", "confidential": "sensitive", "secret": "sensitive",
    "special_category": "sensitive", "restricted": "sensitive", "medium": "sensitive",
}  # fmt: skip


def _norm_key(key: object) -> str:
    text = _CAMEL_RE.sub("_", str(key).strip())
    return re.sub(r"[\s\-]+", "_", text).casefold()


def normalise_sensitivity(value: object) -> str:
    """Map a model's sensitivity label to the four classes; unknown labels fail closed."""
    if value is None:
        return "none"
    key = _norm_key(value)
    return _SENSITIVITY_SYNONYMS.get(key, "sensitive")


def _candidates(raw: str) -> list[str]:
    """JSON texts to try, in order: fenced blocks, the whole reply, then its first bracket on."""
    out = [m.group(2).strip() for m in _FENCE_RE.finditer(raw)]
    stripped = raw.strip()
    out.append(stripped)
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if starts:
        out.append(stripped[min(starts) :])
    return out


def _load(raw: str) -> Any:
    decoder = json.JSONDecoder()
    for text in _candidates(raw):
        if not text:
            continue
        try:
            value, _ = decoder.raw_decode(text)
        except ValueError:
            continue
        return value
    return None


def _items(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        lowered = {_norm_key(k): v for k, v in value.items()}
        for key in _ENVELOPE_KEYS:
            if isinstance(lowered.get(key), list):
                return list(lowered[key])
        if any(alias in lowered for alias in _KEY_ALIASES["content"]):
            return [value]  # a single fact without an envelope
    return []


def _field(fields: Mapping[str, Any], name: str) -> Any:
    for alias in _KEY_ALIASES[name]:
        if alias in fields:
            return fields[alias]
    return None


def _tags(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple):
        return ()
    out: dict[str, None] = {}
    for tag in value:
        if isinstance(tag, str) and tag.strip() and len(tag.strip().encode("utf-8")) <= MAX_TAG_BYTES:
            out[tag.strip()] = None
    return tuple(out)[:MAX_FACT_TAGS]


def _importance(value: Any, default: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    if not math.isfinite(out):
        return default
    return min(1.0, max(0.0, out))


def parse_facts(
    raw: object, *, max_facts: int = MAX_FACTS, max_chars: int = MAX_FACT_CHARS
) -> list[ExtractedFact]:
    """Parse a model's reply into facts; never raises (an unreadable reply gives ``[]``).

    Args:
        raw: the reply text (JSON, possibly fenced or wrapped in prose).
        max_facts: at most this many facts are returned.
        max_chars: a longer fact is cut to this length.
    """
    if not isinstance(raw, str):
        return []
    facts: list[ExtractedFact] = []
    for item in _items(_load(raw)):
        if len(facts) >= max_facts:
            break
        if isinstance(item, str):
            fields: dict[str, Any] = {"content": item}
        elif isinstance(item, Mapping):
            fields = {_norm_key(k): v for k, v in item.items()}
        else:
            continue
        content = _field(fields, "content")
        if not isinstance(content, str) or not content.strip():
            continue
        content = " ".join(content.split())
        if len(content) > max_chars:
            content = content[: max_chars - 1] + "…"
        facts.append(
            ExtractedFact(
                content=content,
                sensitivity=normalise_sensitivity(_field(fields, "sensitivity")),
                topic_tags=_tags(_field(fields, "topic_tags")),
                importance=_importance(_field(fields, "importance"), 0.6),
            )
        )
    return facts


_EXTRACT_INSTRUCTIONS = (
    "Extract durable facts from this conversation between a user and an AI assistant: facts about the "
    "user, their preferences, goals, decisions, and anything they will expect to be remembered. Each "
    "fact is one self-contained sentence that makes sense without the conversation. Skip small talk and "
    "anything only true for this moment. Classify each fact's sensitivity: 'none' (harmless), 'low' "
    "(mildly personal), 'pii' (identifies a person: names, contacts, addresses, account numbers) or "
    "'sensitive' (health, finances, beliefs, credentials, or anything you are unsure about). Give 1-5 "
    "short lowercase topic tags and an importance from 0 to 1. Return at most {max_facts} facts as JSON "
    'of the form {{"facts": [{{"content": ..., "sensitivity": ..., "topic_tags": [...], "importance": ...}}]}}; '
    "an empty list when there is nothing worth keeping."
)


class OpenAIFactExtractor:
    """A ``FactExtractor`` using an OpenAI-compatible chat endpoint with structured output.

    Sends ``response_format={"type": "json_schema", ...}`` (``FACTS_SCHEMA``, strict)
    so conforming servers return exactly the schema; ``parse_facts`` still reads the
    reply defensively, because compatible servers vary.

    Use it as ``async with OpenAIFactExtractor(...) as x:`` (or call ``aclose``) so the
    HTTP client it creates is closed; a ``client=`` you pass is never closed here.

    Args:
        model: chat model name.
        api_key / base_url / client / timeout / max_retries: as ``OpenAISummarizer``.
        max_facts: upper bound on facts per call.
        structured_output: send the JSON schema (turn off for servers that reject it).

    Raises:
        ConfigurationError: the ``openai`` extra is missing, or no API key is available.
    """

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        max_facts: int = 20,
        structured_output: bool = True,
    ) -> None:
        self._chat = OpenAIChat(
            "OpenAIFactExtractor", model=model, api_key=api_key, base_url=base_url, client=client,
            timeout=timeout, max_retries=max_retries,
        )  # fmt: skip
        self.max_facts = max_facts
        self.structured_output = structured_output

    def __repr__(self) -> str:
        return f"OpenAIFactExtractor(model={self._chat.model!r})"

    async def extract(self, turns: Sequence[Turn]) -> list[ExtractedFact]:
        if not turns:
            return []
        options: dict[str, Any] = {"temperature": 0}
        if self.structured_output:
            options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "extracted_facts", "strict": True, "schema": FACTS_SCHEMA},
            }
        messages = [
            {"role": "system", "content": _EXTRACT_INSTRUCTIONS.format(max_facts=self.max_facts)},
            {"role": "user", "content": transcript(turns)},
        ]
        return parse_facts(await self._chat.complete(messages, **options), max_facts=self.max_facts)

    async def aclose(self) -> None:
        """Close the HTTP client if this extractor created it."""
        await self._chat.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
