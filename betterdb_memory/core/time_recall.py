"""Time in a recall: the window's engine clauses, the fuzzy boost, and the present order. Pure.

A recall query may say when ("what did I do last week?"). ``time_plan`` finds the
expression (``core.timewindow``) and says what the recall does with it:

* **exact window** ("yesterday", "in May 2023", "since March", "before 2024"): the
  rest of the question is searched, and what falls in the window is ranked first
  (``window_first``). The window's KNN queries join the recall's own in one pipelined
  round trip, merged in the client: on the main index one query (``inside_clause``) for
  *events* whose ``valid_from`` falls in ``[a, b)`` (``event_clause``, the fallback to
  ``created_at`` for the reference's documents included) or *states* valid in the window
  (``state_clause``: a memory with a subject, ``state_from`` before ``b``, still current,
  so it was true during the window: an address counts for "last week"); on the history
  index, the *past versions* of a subject that overlapped the window (``history_clause``:
  Lisbon, valid 2020-2024, for "where did Ada live in 2022?" after the move to Berlin).
  Each asks for ``window_k`` hits, not the recall's whole pool: they only need to fill
  the ``k`` places the window takes first (bench/results/temporal.md). The rest follows,
  so a window the asker meant otherwise ("in June", of a conversation dated years ago,
  asked against today) never empties a recall: filtering instead cost 3 points of hit@5
  on LoCoMo; ranking first keeps the window's precision when it holds at least ``k``.
* **fuzzy window** ("recently", "a few weeks ago", "the other day"): nothing is
  filtered; a hit inside the window gains ``FUZZY_BOOST`` on its similarity
  (``weights.similarity * FUZZY_BOOST`` on the composite score).
* **no window, no ``as_of``** (a question about the present): same-slot supersession
  (``core.supersession``) ranks the newer statement of a slot above the older ones,
  after the composite score and before ``k`` is cut (``supersede``).

A query without a time expression is searched and ranked exactly as before: the plan
only adds same-slot supersession, which moves nothing when no two candidates state the
same slot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass

from .models import MemoryHit, MemoryItem, new_hit
from .query import IndexLayout
from .scoring import ScoreParts, Weights
from .supersession import effective_scores, rank_superseded
from .timewindow import TimeWindow, parse_time_window, resolve_tz
from .validity import VALID_FROM, VALID_UNTIL, window

__all__ = [
    "FUZZY_BOOST",
    "STATE_FROM",
    "TimePlan",
    "boost_window",
    "event_clause",
    "history_clause",
    "inside_clause",
    "inside_of",
    "main_k",
    "search_text",
    "state_clause",
    "supersede",
    "time_plan",
    "whole_items",
    "window_first",
    "window_k",
    "with_window",
]

STATE_FROM = "state_from"  # NUMERIC, = valid_from, written only on memories with a subject
_FULL = IndexLayout()  # an index this library made: every field
FUZZY_BOOST = 0.25  # added to the 0..1 similarity of a hit inside a fuzzy window
#: Hits each window query asks for, per hit of the recall (``window_k``).
WINDOW_FACTOR = 2
#: ... and at least this many (a recall of one hit still gives the ranker a choice).
WINDOW_MIN = 10


@dataclass(frozen=True, slots=True)
class TimePlan:
    """What a recall does about time.

    Attributes:
        window: the window understood in the query, or None.
        present: the question is about the present (no window, no ``as_of``):
            same-slot supersession applies.
    """

    window: TimeWindow | None = None
    present: bool = True

    @property
    def filters(self) -> bool:
        """The window filters in the engine (an exact window)."""
        return self.window is not None and not self.window.fuzzy

    @property
    def boosts(self) -> bool:
        """The window boosts in the client (a fuzzy window)."""
        return self.window is not None and self.window.fuzzy

    @property
    def reorders(self) -> bool:
        """The ranked candidates are re-ordered before ``k`` is cut (window, boost or supersession)."""
        return self.present or self.window is not None

    @property
    def mode(self) -> str | None:
        """``"filter"`` / ``"boost"`` for a recall with a window (the metric's label), else None."""
        if self.window is None:
            return None
        return "boost" if self.window.fuzzy else "filter"


def time_plan(query: str | None, *, as_of: object = None, tz: object = None, timed: bool = False) -> TimePlan:
    """The plan of a recall of ``query`` (None: a vector alone, no window is looked for).

    ``as_of``: the instant the query's relative expressions count from (default now).
    ``timed``: the recall already asks about another time (``as_of``, ``since`` /
    ``until``): it is not a question about the present.

    Raises:
        ValidationError: a bad ``tz`` (``validation.timezone``) or ``as_of``, before any I/O.
    """
    resolve_tz(tz)  # checked even when the query has no time expression
    found = None if query is None else parse_time_window(query, as_of=as_of, tz=tz)
    return TimePlan(window=found, present=as_of is None and found is None and not timed)


def search_text(query: str, plan: TimePlan) -> str:
    """What the recall embeds: the query without its time expression, unless nothing else is left."""
    w = plan.window
    if w is None or not w.query.strip(" \t\n?.!,;:"):
        return query
    return w.query


def event_clause(w: TimeWindow, layout: IndexLayout = _FULL) -> str:
    """Events in the window: ``valid_from`` in ``[a, b)`` (``created_at`` on an index without it)."""
    if layout.valid_from:
        return window(w.start_ms, w.end_ms)
    return f"@created_at:{_range(w)}"


def state_clause(w: TimeWindow, layout: IndexLayout = _FULL) -> str | None:
    """Current states valid in the window: ``state_from`` before its end; None without the field.

    Every document under the main index is current (superseded versions live under
    the history prefix), so a state that began before the window's end was still
    true during it.
    """
    if not layout.state_from:
        return None
    hi = "+inf" if w.end_ms is None else f"({int(w.end_ms)}"
    return f"@{STATE_FROM}:[-inf {hi}]"


def inside_clause(w: TimeWindow, layout: IndexLayout = _FULL) -> str:
    """Events in the window or current states valid in it: one clause, so one KNN query.

    Anchored on a positive union (no negation below it), the candidates: ``valid_from``
    in ``[a, b)``, a state begun before ``b``, or ``created_at`` in ``[a, b)`` (the
    reference's documents, written without ``valid_from``); less those that only the
    last let in, a ``created_at`` in the window with a ``valid_from`` outside it (a
    memory written in the window about another time) and no state. The engine then
    visits the window's documents only: the earlier form, ``-(NOT events NOT states)``
    under a match-all range, visited every document of the scope through nested
    negations and cost an unscoped recall ~0.3 ms of server time (bench/results/temporal.md,
    section E). RediSearch 2.10.5 loses documents under a negation *below* a union once
    ANDed with a scope (``core.validity``'s docstring): here the negation is beside it.
    Without ``state_from`` it is the events' clause; without ``valid_from`` (an index
    another library made) the union of ``created_at`` in the window and the states.
    """
    state = state_clause(w, layout)
    if state is None:
        return event_clause(w, layout)
    if w.start_ms is not None and w.end_ms is not None and w.start_ms >= w.end_ms:
        return state  # no event falls in an empty window (and the engine refuses its range)
    rng = _range(w)
    if not layout.valid_from:
        return f"(@created_at:{rng} | {state})"
    outside = [f"@{VALID_FROM}:[-inf ({int(w.start_ms)}]"] if w.start_ms is not None else []
    outside += [f"@{VALID_FROM}:[{int(w.end_ms)} +inf]"] if w.end_ms is not None else []
    if not outside:  # no bound: every memory is inside
        return f"@created_at:{rng}"
    other_time = outside[0] if len(outside) == 1 else f"({' | '.join(outside)})"
    return f"(@{VALID_FROM}:{rng} | {state} | @created_at:{rng}) -(@created_at:{rng} {other_time} -{state})"


def _range(w: TimeWindow) -> str:
    lo = "-inf" if w.start_ms is None else str(int(w.start_ms))
    hi = "+inf" if w.end_ms is None else f"({int(w.end_ms)}"
    return f"[{lo} {hi}]"


def history_clause(w: TimeWindow) -> str:
    """History index: superseded versions valid at some instant of the window.

    ``valid_from < b`` (``created_at`` for a version written without one: a fact the
    reference wrote) and ``valid_until > a`` (``TimeWindow.overlaps``); the positive
    range first, so the query is not anchored on a match-all range.
    """
    parts = [] if w.start_ms is None else [f"@{VALID_UNTIL}:[({int(w.start_ms)} +inf]"]
    parts.append(window(None, w.end_ms))
    return " ".join(p for p in parts if p) or f"@{VALID_UNTIL}:[-inf +inf]"


def window_k(k: int, pool: int) -> int:
    """Hits each window query asks for: ``WINDOW_FACTOR * k`` (at least ``WINDOW_MIN``), at most ``pool``.

    The window's hits take the recall's first places, so ``k`` of them keep its precision
    inside the window; twice that leaves the ranker a choice among them (``k`` alone cost
    LoCoMo 0.4 points of held-out hit@5). Asking for the whole pool (50 when re-ranking)
    added up to twice the candidates to rank and parse (bench/results/temporal.md, section E).
    """
    return max(1, min(pool, max(WINDOW_MIN, WINDOW_FACTOR * k)))


def main_k(pool: int, k: int) -> int:
    """Hits the recall's own KNN asks for beside an exact window's query: ``k`` (at most ``pool``).

    The window's hits rank first; the recall's own KNN fills the places after them, and
    ``k`` nearest memories fill them all. Asking for the rest of the pool instead (``pool``
    less the window's hits, as before) ranked the same on LoCoMo's 211 windowed questions
    (held-out hit@5 0.763 -> 0.773, MRR@10 0.592 -> 0.590, off-topic recalls empty 195 ->
    197) and on the diary (precision@5 inside 1.000, topic hit@5 0.880 -> 0.886), and cost
    the engine a KNN of 40 more hits: with it a windowed recall cost 1.21x one without, now
    0.94-0.98x on RediSearch (bench/results/temporal.md, section E).
    """
    return max(1, min(k, pool))


def with_window(hits: Sequence[MemoryHit], plan: TimePlan) -> list[MemoryHit]:
    """The hits with ``explain.time_window`` set (explained hits only)."""
    if plan.window is None:
        return list(hits)
    described = plan.window.describe()
    return [
        h
        if h.explain is None
        else dataclasses.replace(h, explain=dataclasses.replace(h.explain, time_window=described))
        for h in hits
    ]


def _rescored(hit: MemoryHit, score: float, superseded_by: str | None = None) -> MemoryHit:
    ex: ScoreParts | None = hit.explain
    if ex is not None:
        ex = dataclasses.replace(ex, score=score, superseded_by=superseded_by or ex.superseded_by)
    return dataclasses.replace(hit, score=score, explain=ex)


def boost_window(hits: Sequence[MemoryHit], w: TimeWindow, weights: Weights) -> list[MemoryHit]:
    """Hits inside a fuzzy window gain ``FUZZY_BOOST`` similarity; best first again (stable)."""
    lift = weights.similarity * FUZZY_BOOST
    out = [_rescored(h, h.score + lift) if w.contains(h.item.valid_from) else h for h in hits]
    out.sort(key=lambda h: h.score, reverse=True)
    return out


def inside_of(w: TimeWindow, inside_ids: Set[str]) -> Callable[[MemoryItem], bool]:
    """Whether a hit's item counts as inside an exact window (``window_first``; ``ranking.rank``'s ``first``).

    Inside: returned by the window's events or states query (``inside_ids``), dated in
    the window, or a superseded version valid during it (``TimeWindow.overlaps``).
    """
    return lambda item: item.id in inside_ids or _inside(item, w)


def window_first(hits: Sequence[MemoryHit], w: TimeWindow, inside_ids: Set[str]) -> list[MemoryHit]:
    """An exact window's hits first, best first within each part; scores stay descending.

    Inside as ``inside_of`` says. Each inside hit is lifted by the same amount, just
    enough to pass the best hit outside, so the order inside and outside is the
    composite score's. (A recall passes ``inside_of`` to ``ranking.rank`` instead, which
    orders the same way and builds only the hits it returns.)
    """
    held = inside_of(w, inside_ids)
    inner = [h for h in hits if held(h.item)]
    if not inner or len(inner) == len(hits):
        return list(hits)
    ids = {h.item.id for h in inner}
    outer = [h for h in hits if h.item.id not in ids]
    lift = max(0.0, max(h.score for h in outer) - min(h.score for h in inner)) + 1e-6
    return [*(_rescored(h, h.score + lift) for h in inner), *outer]


def _inside(item: MemoryItem, w: TimeWindow) -> bool:
    if item.valid_until is not None:  # a past version: valid at some instant of the window
        return w.overlaps(item.valid_from, item.valid_until)
    return w.contains(item.valid_from)


def whole_items(hits: Sequence[MemoryHit], full: Sequence[MemoryItem | None]) -> list[MemoryHit]:
    """The ranked ``hits`` with their items read whole: ``full`` holds one per current hit, in order.

    A superseded version (``valid_until`` set) came whole from the history index and is
    not read again (its key left the reference's prefix); a current memory gone since
    the search (``None``) is left out.
    """
    rest = iter(full)
    out: list[MemoryHit] = []
    for h in hits:
        item = h.item if h.item.valid_until is not None else next(rest)
        if item is not None:
            out.append(h if item is h.item else new_hit(item, h.score, h.similarity, h.distance, h.explain))
    return out


def supersede(
    hits: Sequence[MemoryHit], pairs: Sequence[tuple[int, int]], scores: Sequence[float] | None = None
) -> list[MemoryHit]:
    """``hits`` (best first) re-ordered by same-slot ``(older, newer)`` pairs of their indices.

    ``scores``: what to rank by instead of the hits' scores (``supersession.focus_scores``).

    The newest version of a slot takes the best score of the slot's versions and each
    older one goes just below its supersessors (``supersession.rank_superseded``); the
    returned scores are those effective scores, so the hits stay best first for any
    caller that sorts them again. An explained older hit names its newest supersessor
    in ``explain.superseded_by``.
    """
    if not pairs:
        return list(hits)
    vf = [h.item.valid_from for h in hits]
    newest: dict[int, int] = {}
    for older, newer in pairs:
        if older not in newest or vf[newer] > vf[newest[older]]:
            newest[older] = newer
    base = [h.score for h in hits] if scores is None else list(scores)
    effective = effective_scores(base, vf, pairs)
    out: list[MemoryHit] = []
    for i in rank_superseded(base, vf, pairs):
        h = hits[i]
        if i in newest:
            out.append(_rescored(h, effective[i], superseded_by=hits[newest[i]].item.id))
        elif effective[i] != h.score:
            out.append(_rescored(h, effective[i]))
        else:
            out.append(h)
    return out
