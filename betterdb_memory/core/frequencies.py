"""Which words of a query are worth a full-text search: document frequencies, learned and kept.

The full-text half of a hybrid recall (``tiers.hybrid``) asks the engine for the
memories that share the query's words. Its cost grows with the number of documents
the words match, not with the number returned: the engine scores every match to
keep the best 50. A word that most memories hold ("user" in "the user prefers ...")
makes that every memory of the index, and it adds nothing to the ranking: its BM25
weight, ``log(1 + (N - n + 0.5) / (n + 0.5))``, is below ``log 2`` once it is in half
the documents, against about 9 for a word in one memory of 10,000. So such words are
left out of the query, as a search engine's "common terms" cut-off does; the
re-ranker still sees them in every candidate's text.

The same reasoning bounds the query's cost as the store grows: the words searched hold
at most ``postings_budget`` (5,000; 2,000 on RediSearch, ``SCORED_POSTINGS_BUDGET``)
memories between them, rarest first. A share
alone would let a word in 40% of a million memories make every recall score 400,000
of them; a word in 5,000 memories cannot single out the one that answers, while the
rarer words, the ones that do, fit under the budget. The budget is set where it
changes no retrieval-quality result (the measurements: the benchmark pages, "Figures
behind the design").

An engine that answers one query per word (valkey-search 1.2: no scored multi-word OR)
pays per word searched, and its answer for a word is an unranked sample of at most 50 of
the word's memories: for a common word, rarely the one that answers. There a question
sends at most ``PER_WORD_MAX_WORDS`` words, the rarest (``rarest``). LoCoMo's questions hold
5.4 content words on average; the cap's trade of quality for latency is measured in
``bench/bench_text_words.py`` (the benchmark pages). RediSearch scores all the words in one
query and keeps them all.

The counts come from ``FT.SEARCH <index> @content:<word> LIMIT 0 0`` probes and from one
count of the whole index, and from the text queries themselves: a query for one word with
no filter answers that word's count in its reply (``learn``). A count costs the engine
about what a search of the word costs (it walks the same postings), so none is sent in a
recall's round trip but the index's first count (and, while the whole index fits in the
KNN's pool, its recount): a word met for the first time is searched for, and counted
after the recall, off its path (``TextPlan.probe_words``, sent by ``tiers.hybrid`` in the
background). A count is fresh for ``ttl`` seconds, longer in proportion to the count past
``RECOUNT_SCALE`` memories (a recount walks them all; a time to live in proportion keeps
what recounting costs the engine flat as the store grows); an older one still decides (the
common-word cut, the rarest words) while it is recounted the same way: frequencies drift
slowly, and a stale one costs speed or a near-weightless word, never a wrong result.
Before, a stale count made its word unknown again: every 30 s each common word of a
question was searched again and counted in the recall's round trip, and on a large
index those two walks of a long posting list were most of the recall's time. Also:
when the whole index holds no more memories than the KNN already returns, the text
query cannot add a candidate and is not sent.

Pure: the caller passes the time and sends the probes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .text_query import TEXT_CANDIDATES, escape_text_term

__all__ = [
    "COMMON_SHARE",
    "FREQUENCY_MAX_TTL",
    "FREQUENCY_TTL",
    "PER_WORD_MAX_WORDS",
    "POSTINGS_BUDGET",
    "RECOUNT_BURST",
    "RECOUNT_RATE",
    "RECOUNT_SCALE",
    "SCORED_POSTINGS_BUDGET",
    "UNCOUNTED_RANK",
    "DocumentFrequencies",
    "RecountPace",
    "TextPlan",
    "rarest",
    "word_count_args",
]

#: A word held by more than this share of the index's memories is not searched for.
COMMON_SHARE = 0.5
#: The words searched for hold at most this many memories between them (rarest first).
POSTINGS_BUDGET = 5000
#: The same budget on an engine that scores every match of one OR query of the words (RediSearch):
#: its query's cost is the sum of the words' memories (FT.PROFILE: the union's counter), each one
#: read and BM25-scored to keep the best 50. 2,000 halves what 5,000 read on a Zipf store (p50
#: 1,834 -> 714 memories at 10k, 1,852 -> 742 at 100k: flat, the budget binds) and the query's
#: server time; LoCoMo, the default recall, in-sample: hit@5 0.755 either way, MRR 0.605 -> 0.604
#: (1,000: 0.602; 500: hit@5 0.746). ``bench/bench_text_budget.py``, ``bench/results/text-budget.md``.
SCORED_POSTINGS_BUDGET = 2000
#: On an engine that answers one query per word (valkey-search), at most this many words are searched.
#: LoCoMo, held out, on valkey-search 1.2.1: hit@5 0.755 with no cap, 0.751 / 0.750 / 0.743 / 0.732
#: with 5 / 4 / 3 / 2 (``bench/bench_text_words.py``). 3: the default recall's time on LoCoMo fell
#: to about 0.65x of every word's, 4 only to about 0.75x, and issue 29's latency budget comes first.
PER_WORD_MAX_WORDS = 3
#: Where ``rarest`` ranks a word not counted yet: as if it held as many memories as one text query returns.
UNCOUNTED_RANK = TEXT_CANDIDATES
#: Seconds a learned count (of a word, or of the whole index) is trusted, when it is at most
#: ``RECOUNT_SCALE``: a larger count is trusted in proportion (``DocumentFrequencies.ttl_of``).
FREQUENCY_TTL = 30.0
#: A count of ``n`` memories is trusted ``FREQUENCY_TTL * n / RECOUNT_SCALE`` seconds when ``n`` is larger.
#: Counting walks the word's postings, so a time to live in proportion to the count bounds what
#: recounting a word costs the engine at ``RECOUNT_SCALE / FREQUENCY_TTL`` postings a second, at any
#: size of store. With one 30 s time to live, bench-1m's default unscoped recall at 500k memories
#: recounted about 4.5 words per recall, each a walk of up to 250k postings on the engine's one
#: thread (``bench/bench_word_counts.py``). The counts at stake are those that decide: a word at or
#: under the scored budget (2,000) is retaken every 30 s as before; a word far over it stays over it.
RECOUNT_SCALE = SCORED_POSTINGS_BUDGET
#: No count is trusted longer than this (seconds), however large: a store that shrinks by most
#: of itself (``forget_by_scope`` of a large scope) has its counts retaken within the hour.
FREQUENCY_MAX_TTL = 3600.0
_CAPACITY = 4096
#: Recounts of counts already learned go at most this many memories a second (their last counts),
#: in bursts of at most ``RECOUNT_BURST``: a count walks its postings on the engine's thread
#: (RediSearch 2.10, 554k memories: ~0.3 us a posting, 17 ms for a word in 50k memories, 157 ms
#: for the whole index), and a recall sent meanwhile waits behind it. 20,000 a second is about
#: 1% of the engine's time. A word never counted is not paced: until it is, every recall that
#: meets it searches it in full.
RECOUNT_RATE = 20_000.0
RECOUNT_BURST = 20_000.0


def word_count_args(index: str, word: str) -> list[str]:
    """FT.SEARCH arguments counting the memories whose ``content`` holds ``word`` (stemmed)."""
    return ["FT.SEARCH", index, f"@content:{escape_text_term(word)}", "LIMIT", "0", "0", "DIALECT", "2"]


@dataclass(frozen=True, slots=True)
class TextPlan:
    """What one recall asks the full-text index.

    ``words``: the words to search for (empty: no text query). ``probe_words``: words
    whose counts are unknown or stale, to count after the recall, off its path.
    ``probe_total``: count the whole index in the recall's round trip (never counted, or
    small enough for the KNN to read whole). ``refresh_total``: its count is stale: recount
    it after the recall.
    """

    words: tuple[str, ...] = ()
    probe_words: tuple[str, ...] = ()
    probe_total: bool = False
    refresh_total: bool = False


def rarest(words: Iterable[str], counts: Mapping[str, int], limit: int) -> tuple[str, ...]:
    """The ``limit`` words of ``words`` most likely to single out the memory that answers, best first.

    Fewest memories first (``counts``): a rare word's query returns its whole posting list,
    a common one's only a sample of it (valkey-search 1.2 does not rank a word's matches).
    A word not counted yet ranks as if it held ``UNCOUNTED_RANK`` memories, as many as one
    query returns: after the words whose whole list comes back, before the ones a query can
    only sample (a question's new words are seldom its common ones: those recur, and are
    counted). A word no memory held when counted ranks last: its query found nothing.
    Ties: the longer word first (usually the rarer), then alphabetical.
    """

    def rank(word: str) -> tuple[float, int, str]:
        n = counts.get(word)
        held = UNCOUNTED_RANK if n is None else (math.inf if n == 0 else n)
        return (held, -len(word), word)

    return tuple(sorted(set(words), key=rank)[: max(0, limit)])


class DocumentFrequencies:
    """Counts of memories per word and in all, each remembered for ``ttl_of`` its value.

    Bounded: past ``capacity`` words the oldest learned is forgotten first.
    """

    def __init__(
        self,
        *,
        ttl: float = FREQUENCY_TTL,
        common_share: float = COMMON_SHARE,
        postings_budget: int = POSTINGS_BUDGET,
        capacity: int = _CAPACITY,
    ) -> None:
        self.ttl = ttl
        self.recount_scale = RECOUNT_SCALE
        self.max_ttl = FREQUENCY_MAX_TTL
        self.common_share = common_share
        self.postings_budget = postings_budget
        self.capacity = capacity
        self._words: dict[str, tuple[int, float]] = {}
        self._total: tuple[int, float] | None = None

    def ttl_of(self, n: int) -> float:
        """Seconds a count of ``n`` memories is trusted: ``ttl``, longer in proportion past ``recount_scale``."""
        return min(self.max_ttl, self.ttl * max(1.0, n / self.recount_scale))

    def _stale(self, entry: tuple[int, float], now: float) -> bool:
        return now - entry[1] > self.ttl_of(entry[0])

    def last(self, word: str | None) -> int | None:
        """The last count learned of ``word`` (None: of the whole index), however old."""
        entry = self._total if word is None else self._words.get(word)
        return None if entry is None else entry[0]

    def total(self, now: float) -> int | None:
        """The index's memory count, if learned less than ``ttl_of`` it ago."""
        if self._total is None or self._stale(self._total, now):
            return None
        return self._total[0]

    def count(self, word: str, now: float) -> int | None:
        """How many memories hold ``word``, if learned less than ``ttl_of`` its count ago."""
        entry = self._words.get(word)
        if entry is None or self._stale(entry, now):
            return None
        return entry[0]

    def plan(
        self,
        words: Sequence[str],
        now: float,
        *,
        pool: int,
        max_words: int | None = None,
        postings_budget: int | None = None,
    ) -> TextPlan:
        """The words to search for, and the counts to take, for a recall whose KNN returns ``pool``.

        A word counted in more than ``common_share`` of the index is dropped, and of the
        counted words the rarest are kept while their counts sum to at most
        ``postings_budget`` (None: the instance's); one never counted is searched for. A
        count past its ``ttl`` still decides, and is retaken (``probe_words``, ``refresh_total``). No word
        survives, or the whole index fits in the KNN's ``pool``: no text query.
        A word no memory held when counted is kept: a memory holding it may have been
        written since, and the engine answers such a word at no cost.
        """
        entry = self._total
        total = None if entry is None else entry[0]
        if total is not None and total <= pool:
            # Recounted on every recall, in its round trip (cheap on a small index): the first
            # write that takes it past the KNN's reach brings the text query back at the next recall.
            return TextPlan(probe_total=True)
        unknown: list[str] = []
        recount: list[str] = []
        counted: list[tuple[int, str]] = []
        for word in words:
            learned = self._words.get(word)
            if learned is None:
                unknown.append(word)
                continue
            n = learned[0]
            if self._stale(learned, now):
                recount.append(word)
            if total is None or n <= self.common_share * total:
                counted.append((n, word))  # a word no memory holds yet stays: one may be written any moment
        kept = set(unknown)
        spent = 0
        budget = self.postings_budget if postings_budget is None else postings_budget
        for n, word in sorted(counted):
            if spent + n > budget:
                break
            spent += n
            kept.add(word)
        if max_words is not None and len(kept) > max_words:
            last = {w: learned[0] for w in kept if (learned := self._words.get(w)) is not None}
            kept = set(rarest(kept, last, max_words))
        return TextPlan(
            words=tuple(w for w in words if w in kept),
            probe_words=tuple(w for w in words if w in unknown or w in recount),
            probe_total=total is None,
            refresh_total=entry is not None and self._stale(entry, now),
        )

    def learn(
        self, counts: Mapping[str, int] | Iterable[tuple[str, int]], total: int | None, now: float
    ) -> None:
        """Remember probe results (``counts`` per word; ``total`` of the index, None if not probed)."""
        if total is not None:
            self._total = (total, now)
        items = counts.items() if isinstance(counts, Mapping) else counts
        for word, n in items:
            self._words.pop(word, None)
            self._words[word] = (n, now)
        while len(self._words) > self.capacity:
            self._words.pop(next(iter(self._words)))


class RecountPace:
    """How fast learned counts are retaken: a bucket of ``rate`` memories a second, ``burst`` deep.

    ``allow(cost, now)`` takes ``cost`` (the count's last value) when the bucket holds that much,
    or is full (a count larger than the bucket goes alone and leaves it in debt). A recount not
    allowed is not queued: its stale count keeps deciding, and the next recall that meets the
    word asks again.
    """

    def __init__(self, rate: float = RECOUNT_RATE, burst: float = RECOUNT_BURST) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._at: float | None = None

    def allow(self, cost: float, now: float) -> bool:
        if self._at is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < min(cost, self.burst):
            return False
        self._tokens -= cost
        return True
