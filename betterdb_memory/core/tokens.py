"""Token counting: a fast heuristic by default, any tokenizer behind a one-method Protocol.

Budgets in ``retrieve_context`` are only as good as the counts they add up. An exact
tokenizer (tiktoken, a Hugging Face tokenizer) is model-specific, can need a
download, and costs far more per call than the arithmetic below, so it is opt-in::

    import tiktoken

    class TiktokenCounter:
        def __init__(self) -> None:
            self._enc = tiktoken.get_encoding("o200k_base")

        def count(self, text: str) -> int:
            return len(self._enc.encode(text))

    store = MemoryStore(client=..., token_counter=TiktokenCounter())
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

from ..errors import ConfigurationError
from .arguments import check_number, is_int

__all__ = ["HeuristicTokenCounter", "TokenCounter", "count_tokens"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens a text costs in a prompt (0 for the empty string)."""

    def count(self, text: str) -> int:
        """Tokens in ``text``; must be >= 0 and should never undercount by much."""
        ...


class HeuristicTokenCounter:
    """``max(ceil(chars / chars_per_token), words)``: no dependency, no download.

    English averages about four characters per token for GPT-style BPE vocabularies.
    The word-count floor matters for text of many short words or single characters
    (``"a b c d"``) where the character estimate alone undercounts: every
    whitespace-separated word costs at least one token.

    Args:
        chars_per_token: average characters per token (lower = more conservative).
    """

    def __init__(self, chars_per_token: float = 4.0) -> None:
        self.chars_per_token = check_number(chars_per_token, "chars_per_token", positive=True, setting=True)

    def count(self, text: str) -> int:
        if not text:
            return 0
        return max(math.ceil(len(text) / self.chars_per_token), len(text.split()))

    def __repr__(self) -> str:
        return f"HeuristicTokenCounter(chars_per_token={self.chars_per_token})"


def count_tokens(counter: TokenCounter, text: str) -> int:
    """Ask ``counter`` and refuse a nonsense answer (a plug-in bug must not skew budgets silently)."""
    n = counter.count(text)
    if not is_int(n) or n < 0:
        raise ConfigurationError(
            f"token counter {counter!r} returned {n!r}; it must return an int >= 0",
            code="configuration.token_counter",
        )
    return n
