"""Which query words go to the full-text index (``core.frequencies``): pure, no server."""

from __future__ import annotations

from betterdb_memory.core.frequencies import (
    COMMON_SHARE,
    FREQUENCY_MAX_TTL,
    RECOUNT_SCALE,
    SCORED_POSTINGS_BUDGET,
    UNCOUNTED_RANK,
    DocumentFrequencies,
    RecountPace,
    TextPlan,
    rarest,
    word_count_args,
)


def test_first_sight_searches_every_word_and_probes_them_and_the_total() -> None:
    df = DocumentFrequencies()
    plan = df.plan(("porto", "user"), 0.0, pool=50)
    assert plan == TextPlan(words=("porto", "user"), probe_words=("porto", "user"), probe_total=True)


def test_a_word_in_most_memories_is_left_out_once_counted() -> None:
    df = DocumentFrequencies()
    df.learn({"user": 9_000, "porto": 3, "kayak": 0}, 10_000, 1.0)
    plan = df.plan(("kayak", "porto", "user"), 2.0, pool=50)
    # "kayak" is in no memory yet: kept (one may be written any moment; the engine answers it for free).
    assert plan == TextPlan(words=("kayak", "porto"), probe_words=(), probe_total=False)


def test_the_cut_is_a_share_of_the_index_inclusive() -> None:
    df = DocumentFrequencies()
    df.learn({"half": int(COMMON_SHARE * 1000), "more": int(COMMON_SHARE * 1000) + 1}, 1000, 0.0)
    assert df.plan(("half", "more"), 0.0, pool=50).words == ("half",)


def test_only_common_words_means_no_text_query() -> None:
    df = DocumentFrequencies()
    df.learn({"user": 900, "note": 800}, 1000, 0.0)
    assert df.plan(("note", "user"), 0.0, pool=50) == TextPlan()


def test_an_index_the_knn_reads_whole_gets_no_text_query_and_is_recounted() -> None:
    df = DocumentFrequencies()
    df.learn({"porto": 1}, 40, 0.0)
    assert df.plan(("porto", "unseen"), 0.0, pool=50) == TextPlan(probe_total=True)
    df.learn({}, 51, 0.5)  # a write took it past the KNN's reach: text again, words probed
    assert df.plan(("porto", "unseen"), 0.6, pool=50) == TextPlan(
        words=("porto", "unseen"), probe_words=("unseen",), probe_total=False
    )


def test_counts_go_stale_after_the_ttl_and_still_decide_while_retaken() -> None:
    df = DocumentFrequencies(ttl=30.0)
    df.learn({"user": 900}, 1000, 0.0)
    assert df.count("user", 30.0) == 900 and df.total(30.0) == 1000
    assert df.count("user", 30.1) is None and df.total(30.1) is None  # not fresh any more
    # Still in 90% of the index as far as anyone knows: not searched, counted again off the path.
    assert df.plan(("user",), 31.0, pool=50) == TextPlan(probe_words=("user",), refresh_total=True)


def test_a_common_word_is_not_searched_again_when_its_count_goes_stale() -> None:
    """At 250k memories a word in 190k of them cost a full walk of its postings twice (search and
    count) in every recall that met it after its count's ttl: the stale count now keeps it out."""
    df = DocumentFrequencies(ttl=30.0)
    df.learn({"kalo1": 190_000, "porto": 3}, 250_000, 0.0)
    plan = df.plan(("kalo1", "porto", "unseen"), 3_700.0, pool=50)
    assert plan == TextPlan(
        words=("porto", "unseen"), probe_words=("kalo1", "porto", "unseen"), refresh_total=True
    )
    df.learn({"kalo1": 190_500, "porto": 4, "unseen": 2}, 250_600, 3_701.0)
    assert df.plan(("kalo1", "porto", "unseen"), 3_702.0, pool=50) == TextPlan(words=("porto", "unseen"))


def test_a_count_is_trusted_in_proportion_to_it_past_the_recount_scale() -> None:
    """Recounting walks the word's postings: a time to live in proportion to the count keeps the
    engine's cost of recounting a word flat as the store grows (bench-1m at 500k memories
    recounted about 4.5 words of up to 250k memories per recall with one 30 s time to live)."""
    df = DocumentFrequencies(ttl=30.0)
    assert df.recount_scale == RECOUNT_SCALE == SCORED_POSTINGS_BUDGET
    assert df.ttl_of(0) == df.ttl_of(RECOUNT_SCALE) == 30.0
    assert df.ttl_of(10 * RECOUNT_SCALE) == 300.0
    assert df.ttl_of(10**9) == FREQUENCY_MAX_TTL
    df.learn({"porto": 3, "boat": RECOUNT_SCALE, "kalo1": 100 * RECOUNT_SCALE}, 400 * RECOUNT_SCALE, 0.0)
    words = ("boat", "kalo1", "porto")
    # At 31 s the counts that decide the budget are retaken; the common word's and the index's are not.
    assert df.plan(words, 31.0, pool=50, postings_budget=RECOUNT_SCALE).probe_words == ("boat", "porto")
    assert not df.plan(words, 31.0, pool=50).refresh_total
    assert df.count("kalo1", 2_999.0) == 100 * RECOUNT_SCALE and df.count("kalo1", 3_001.0) is None
    late = df.plan(words, FREQUENCY_MAX_TTL + 1, pool=50)
    assert late.probe_words == words and late.refresh_total  # capped: retaken within the hour
    # A time to live of 0 (tests) makes every count stale at once, however large.
    df.ttl = 0.0
    assert df.plan(words, 0.5, pool=50).probe_words == words


def test_a_small_index_is_recounted_in_the_recall_even_when_its_count_is_stale() -> None:
    df = DocumentFrequencies(ttl=30.0)
    df.learn({}, 40, 0.0)
    assert df.plan(("porto",), 100.0, pool=50) == TextPlan(probe_total=True)


def test_capacity_forgets_the_oldest_learned_first() -> None:
    df = DocumentFrequencies(capacity=2)
    df.learn({"a": 1, "b": 2}, None, 0.0)
    df.learn({"a": 3}, None, 1.0)  # relearned: now the newest
    df.learn({"c": 4}, None, 2.0)
    assert df.count("b", 2.0) is None and df.count("a", 2.0) == 3 and df.count("c", 2.0) == 4


def test_word_count_args_escape_the_word() -> None:
    args = word_count_args("idx", "o'neil-x")
    assert args[:2] == ["FT.SEARCH", "idx"] and args[3:] == ["LIMIT", "0", "0", "DIALECT", "2"]
    assert args[2].startswith("@content:") and "\\-" in args[2]


def test_the_words_searched_hold_at_most_the_budget_between_them_rarest_first() -> None:
    """On a large index a word can be rare as a share and still hold thousands of memories:
    the rarest words are kept while their counts fit the budget, so the cost stays bounded."""
    df = DocumentFrequencies(postings_budget=1000)
    df.learn({"porto": 3, "kayak": 600, "trip": 450, "boat": 2000, "none": 0}, 100_000, 0.0)
    plan = df.plan(("boat", "kayak", "none", "porto", "trip", "unseen"), 0.0, pool=50)
    # 0 + 3 + 450 fit; 600 more would pass 1,000; a word never counted is searched (and probed).
    assert plan.words == ("none", "porto", "trip", "unseen")
    assert plan.probe_words == ("unseen",)


def test_a_word_over_the_budget_alone_is_not_searched() -> None:
    df = DocumentFrequencies(postings_budget=5000)
    df.learn({"window": 12_000}, 100_000, 0.0)  # 12% of the index: under the share, over the budget
    assert df.plan(("window",), 0.0, pool=50) == TextPlan()


def test_rarest_puts_fewest_memories_first_then_uncounted_words_then_empty_ones() -> None:
    counts = {"caroline": 300, "sunrise": 4, "paint": UNCOUNTED_RANK, "educaton": 0, "art": 60}
    words = ("art", "caroline", "educaton", "lake", "paint", "sunrise")
    # "lake" is not counted: it ranks as if it held UNCOUNTED_RANK memories, tied with "paint"
    # (the longer first); "educaton" held none when counted: last.
    assert rarest(words, counts, 6) == ("sunrise", "paint", "lake", "art", "caroline", "educaton")
    assert rarest(words, counts, 2) == ("sunrise", "paint")
    assert rarest(words, counts, 0) == ()
    assert rarest(("b", "a", "a"), {}, 5) == ("a", "b")  # unique; ties alphabetical


def test_a_words_cap_keeps_the_rarest_and_still_probes_every_new_word() -> None:
    df = DocumentFrequencies()
    df.learn({"caroline": 300, "melanie": 280, "sunrise": 3}, 5_000, 0.0)
    words = ("caroline", "melanie", "paint", "sunrise")
    plan = df.plan(words, 1.0, pool=50, max_words=2)
    assert plan == TextPlan(words=("paint", "sunrise"), probe_words=("paint",), probe_total=False)
    assert df.plan(words, 1.0, pool=50).words == words  # no cap: every word under the budget
    assert df.plan(words, 1.0, pool=50, max_words=10).words == words


def test_a_count_past_its_ttl_still_ranks_its_word_under_the_cap() -> None:
    df = DocumentFrequencies(ttl=30.0)
    df.learn({"caroline": 300, "sunrise": 3}, 5_000, 0.0)
    plan = df.plan(("caroline", "paint", "sunrise"), 80.0, pool=50, max_words=2)
    # Every count is stale: all three are counted again (after the recall), the old counts still choose.
    assert plan.words == ("paint", "sunrise")
    assert plan.probe_words == ("caroline", "paint", "sunrise") and plan.refresh_total
    assert not plan.probe_total


def test_a_budget_given_with_the_plan_overrides_the_instances() -> None:
    """RediSearch's scored query has a budget of its own (``SCORED_POSTINGS_BUDGET``), passed per plan."""
    df = DocumentFrequencies(postings_budget=5000)
    df.learn({"porto": 3, "kayak": 600, "trip": 450, "boat": 2000}, 100_000, 0.0)
    words = ("boat", "kayak", "porto", "trip")
    assert df.plan(words, 0.0, pool=50).words == words  # 3,053 in all: under 5,000
    assert df.plan(words, 0.0, pool=50, postings_budget=1000).words == ("porto", "trip")
    assert df.plan(words, 0.0, pool=50, postings_budget=0).words == ()
    assert df.postings_budget == 5000  # the instance's own is untouched


def test_recounts_go_at_the_pace_of_their_last_counts() -> None:
    """A recount walks the word's postings on the engine's thread: at most ``rate`` memories a second."""
    pace = RecountPace(rate=1_000.0, burst=2_000.0)
    assert pace.allow(1_500, 0.0)  # the bucket starts full
    assert not pace.allow(1_000, 0.1)  # 500 + 100 left
    assert pace.allow(600, 0.1)
    assert not pace.allow(500, 0.2)  # 100 refilled
    assert pace.allow(500, 0.7)
    # A count larger than the bucket goes once it is full, alone, and leaves it in debt.
    assert not pace.allow(50_000, 1.0) and pace.allow(50_000, 2.6)
    assert not pace.allow(1, 40.0) and pace.allow(1, 50.7)


def test_last_is_the_last_count_however_old() -> None:
    df = DocumentFrequencies(ttl=30.0)
    assert df.last("porto") is None and df.last(None) is None
    df.learn({"porto": 7}, 900, 0.0)
    assert df.count("porto", 1e6) is None and df.last("porto") == 7 and df.last(None) == 900
