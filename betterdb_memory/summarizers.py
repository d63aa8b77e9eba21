"""The ``Summarizer`` seam: turns that leave the L1 window become one L2 summary.

Two implementations ship:

* ``ExtractiveSummarizer`` (the default): no model, no network, deterministic. It
  keeps the opening sentence of each user message (usually the request that gives
  the turn its topic) and adds the sentences whose words recur most across the
  batch, within a length bound, in conversation order. Crude next to an LLM, but a
  summary that exists beats a better one that is never written, and it keeps the
  exact words recall will search for.
* ``OpenAISummarizer`` (extra ``openai``): one chat-completions call per batch, to
  the OpenAI API or any server speaking its wire format (``base_url``).

The OpenAI SDK is imported when an OpenAI class is constructed, never at import.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from .core.turns import Turn
from .core.validation import check_int
from .errors import ConfigurationError, ServerError

__all__ = ["ExtractiveSummarizer", "OpenAISummarizer", "Summarizer", "transcript"]

_EXTRA = "openai"
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "out",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "too",
        "up",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yes",
        "ok",
        "okay",
        "please",
        "thanks",
        "thank",
    ]
)


@runtime_checkable
class Summarizer(Protocol):
    """Condenses a batch of turns (oldest first) into one self-contained text."""

    async def summarize(self, turns: Sequence[Turn]) -> str:
        """Return the summary; raise to report failure (the store counts and logs it)."""
        ...


def transcript(turns: Sequence[Turn], *, max_chars_per_message: int = 4000) -> str:
    """Turns as ``User:`` / ``Assistant:`` lines, each message clipped, for an LLM prompt."""

    def clip(text: str) -> str:
        return text if len(text) <= max_chars_per_message else text[: max_chars_per_message - 1] + "…"

    lines: list[str] = []
    for turn in turns:
        lines.append(f"User: {clip(turn.user_message)}")
        lines.append(f"Assistant: {clip(turn.assistant_message)}")
        for tr in turn.tool_results:
            lines.append(f"Tool {tr.tool_name}: {clip(str(tr.result))}")
    return "\n".join(lines)


class ExtractiveSummarizer:
    """Sentence extraction by term frequency; see the module docstring for the why.

    Args:
        max_chars: upper bound on the summary's length.
        max_sentence_chars: a longer sentence is cut to this length.
    """

    def __init__(self, *, max_chars: int = 1500, max_sentence_chars: int = 240) -> None:
        for name, value in (("max_chars", max_chars), ("max_sentence_chars", max_sentence_chars)):
            check_int(value, name, minimum=20, setting=True)
        self.max_chars = max_chars
        self.max_sentence_chars = max_sentence_chars

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(max_chars={self.max_chars})"

    def _clip(self, sentence: str) -> str:
        s = " ".join(sentence.split())
        return s if len(s) <= self.max_sentence_chars else s[: self.max_sentence_chars - 1] + "…"

    async def summarize(self, turns: Sequence[Turn]) -> str:
        return self.summarize_sync(turns)

    def summarize_sync(self, turns: Sequence[Turn]) -> str:
        """The same summary without the coroutine (it does no I/O)."""
        # (position, role, sentence, is_anchor); position keeps conversation order.
        sentences: list[tuple[int, str, str, bool]] = []
        for turn in turns:
            for role, text in (("user", turn.user_message), ("assistant", turn.assistant_message)):
                parts = [p for p in (s.strip() for s in _SENTENCE_RE.split(text)) if p]
                for j, part in enumerate(parts):
                    sentences.append((len(sentences), role, self._clip(part), role == "user" and j == 0))
        if not sentences:
            return ""
        tf: Counter[str] = Counter()
        words_of: list[set[str]] = []
        for _, _, sentence, _ in sentences:
            words = {
                w for w in (m.group(0).casefold() for m in _WORD_RE.finditer(sentence)) if w not in _STOPWORDS
            }
            words_of.append(words)
            tf.update(words)

        def score(i: int) -> float:
            words = words_of[i]
            return sum(tf[w] for w in words) / (1.0 + len(words)) ** 0.5 if words else 0.0

        # Anchors first (one per turn), best-scored first when they alone overflow; then
        # the best other sentences while they fit. Output in conversation order.
        anchors = sorted((i for i, s in enumerate(sentences) if s[3]), key=lambda i: (-score(i), i))
        others = sorted((i for i, s in enumerate(sentences) if not s[3]), key=lambda i: (-score(i), i))
        chosen: set[int] = set()
        used = 0
        for i in [*anchors, *others]:
            line_len = len(sentences[i][2]) + len(sentences[i][1]) + 5
            if used + line_len <= self.max_chars:
                chosen.add(i)
                used += line_len
        return "\n".join(f"- {sentences[i][1]}: {sentences[i][2]}" for i in sorted(chosen))


# -- OpenAI-compatible chat completions ---------------------------------------------------


def _import_openai(owner: str) -> Any:
    if importlib.util.find_spec("openai") is None:
        raise ConfigurationError(
            f"{owner} needs the '{_EXTRA}' extra; install it with: pip install 'betterdb-memory[{_EXTRA}]'",
            code="configuration.missing_extra",
            details={"extra": _EXTRA, "missing": ["openai"]},
        )
    return importlib.import_module("openai")


class OpenAIChat:
    """One chat-completions call with the library's error mapping (shared by the LLM seams).

    The SDK's own retries (``max_retries``) handle 408/429/5xx and connection faults;
    what is still failing afterwards becomes a ``ServerError`` (``server.llm_*``),
    or a ``ConfigurationError`` for authentication and unknown-model answers.
    """

    def __init__(
        self,
        owner: str,
        *,
        model: str,
        api_key: str | None,
        base_url: str | None,
        client: Any,
        timeout: float,
        max_retries: int,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(
                f"{owner}: model must be a non-empty string", details={"argument": "model"}
            )
        self._openai = _import_openai(owner)
        self.owner = owner
        self.model = model
        if client is not None:
            self._client = client
            self._owns_client = False
            return
        try:
            self._client = self._openai.AsyncOpenAI(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
            )
        except self._openai.OpenAIError as exc:  # no key given and none in the environment
            raise ConfigurationError(
                f"{owner} cannot create its OpenAI client: {exc}", code="configuration.llm_auth"
            ) from exc
        self._owns_client = True

    async def complete(self, messages: Sequence[Mapping[str, str]], **options: Any) -> str:
        """The first choice's text; raises on an HTTP error, a refusal or an empty answer."""
        details: dict[str, Any] = {"model": self.model, "owner": self.owner}
        try:
            response = await self._client.chat.completions.create(
                model=self.model, messages=[dict(m) for m in messages], **options
            )
        except self._openai.APIStatusError as exc:
            status = int(exc.status_code)
            details["status"] = status
            message = f"{self.owner}: chat completion failed with HTTP {status}: {exc.message}"
            if status in (401, 403):
                raise ConfigurationError(message, code="configuration.llm_auth", details=details) from exc
            if status == 404:
                raise ConfigurationError(message, code="configuration.llm_model", details=details) from exc
            raise ServerError(message, code="server.llm_http_error", details=details) from exc
        except self._openai.APIConnectionError as exc:  # includes timeouts
            raise ServerError(
                f"{self.owner}: chat completion endpoint unreachable: {exc}",
                code="server.llm_unreachable",
                details=details,
            ) from exc
        choices = getattr(response, "choices", None) or []
        message_obj = choices[0].message if choices else None
        content = getattr(message_obj, "content", None)
        if not isinstance(content, str) or not content.strip():
            refusal = getattr(message_obj, "refusal", None)
            raise ServerError(
                f"{self.owner}: the model returned no content"
                + (f" (refusal: {refusal})" if refusal else ""),
                code="server.llm_empty_response",
                details=details,
            )
        return content

    async def aclose(self) -> None:
        """Close the SDK client if this object created it; a caller's ``client=`` is theirs to close."""
        if self._owns_client:
            await self._client.close()


_SUMMARY_INSTRUCTIONS = (
    "You summarise a slice of a conversation between a user and an AI assistant so that it can be "
    "recalled later as long-term memory. Keep facts, decisions, preferences, names, numbers and open "
    "questions; drop pleasantries. Write plain prose or short bullet points, at most {words} words, "
    "in the language of the conversation. Do not invent anything."
)


class OpenAISummarizer:
    """A ``Summarizer`` backed by an OpenAI-compatible chat-completions endpoint.

    Use it as ``async with OpenAISummarizer(...) as s:`` (or call ``aclose``) so the HTTP
    client it creates is closed; a ``client=`` you pass is never closed here.

    Args:
        model: chat model name.
        api_key: API key; ``None`` lets the SDK read ``OPENAI_API_KEY``.
        base_url: API root (``http://host:port/v1``) of a compatible server.
        client: an ``openai.AsyncOpenAI`` to use instead (not closed by ``aclose``).
        timeout: seconds per request.
        max_retries: the SDK's retries of 408/429/5xx and connection faults.
        max_words: length asked of the model.
        max_tokens: hard cap on the completion.

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
        max_words: int = 150,
        max_tokens: int = 400,
    ) -> None:
        self._chat = OpenAIChat(
            "OpenAISummarizer", model=model, api_key=api_key, base_url=base_url, client=client,
            timeout=timeout, max_retries=max_retries,
        )  # fmt: skip
        self.max_words = max_words
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"OpenAISummarizer(model={self._chat.model!r})"

    async def summarize(self, turns: Sequence[Turn]) -> str:
        messages = [
            {"role": "system", "content": _SUMMARY_INSTRUCTIONS.format(words=self.max_words)},
            {"role": "user", "content": transcript(turns)},
        ]
        text = await self._chat.complete(messages, max_tokens=self.max_tokens, temperature=0)
        return text.strip()

    async def aclose(self) -> None:
        """Close the HTTP client if this summariser created it."""
        await self._chat.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
