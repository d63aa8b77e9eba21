"""Pure L1 pieces: the fact parser, the turn codec, token counting, the extractive summariser, cache keys."""

from __future__ import annotations

import json

import pytest

from betterdb_memory.core.tokens import HeuristicTokenCounter, count_tokens
from betterdb_memory.core.turns import ToolResult, Turn, decode_turn, encode_turn, parse_tool_results
from betterdb_memory.errors import ConfigurationError, ValidationError
from betterdb_memory.extraction import ExtractedFact, normalise_sensitivity, parse_facts
from betterdb_memory.summarizers import ExtractiveSummarizer, transcript

# -- parse_facts ------------------------------------------------------------------------


def test_parses_plain_envelope() -> None:
    raw = json.dumps(
        {
            "facts": [
                {
                    "content": "User lives in Lyon",
                    "sensitivity": "pii",
                    "topic_tags": ["home"],
                    "importance": 0.9,
                }
            ]
        }
    )
    assert parse_facts(raw) == [ExtractedFact("User lives in Lyon", "pii", ("home",), 0.9)]


def test_parses_fenced_json_with_and_without_language() -> None:
    """A Markdown fence around the JSON (which the reference's parser rejected) is unwrapped."""
    body = '{"facts": [{"content": "Likes tea", "sensitivity": "none", "topic_tags": [], "importance": 0.5}]}'
    for raw in (f"```json\n{body}\n```", f"```\n{body}\n```", f"Here you go:\n```JSON\n{body}\n```\nDone."):
        assert [f.content for f in parse_facts(raw)] == ["Likes tea"], raw


def test_key_and_value_case_variants() -> None:
    """Keys match whatever their case or style; sensitivity labels match case-insensitively."""
    raw = json.dumps(
        {
            "Facts": [
                {
                    "Content": "Name is Ada",
                    "SENSITIVITY": "PII",
                    "topicTags": ["identity"],
                    "Importance": "0.8",
                },
                {"FACT": "Has diabetes", "Sensitivity": "Sensitive", "Topic Tags": "health, medical"},
                {"text": "Prefers email", "sensitivity_level": "LOW", "tags": ["contact"]},
            ]
        }
    )
    facts = parse_facts(raw)
    assert [(f.content, f.sensitivity) for f in facts] == [
        ("Name is Ada", "pii"),
        ("Has diabetes", "sensitive"),
        ("Prefers email", "low"),
    ]
    assert facts[0].topic_tags == ("identity",) and facts[0].importance == pytest.approx(0.8)
    assert facts[1].topic_tags == ("health", "medical")


def test_bare_list_prose_and_single_object() -> None:
    assert [f.content for f in parse_facts('[{"content": "A"}, "B"]')] == ["A", "B"]
    assert [f.content for f in parse_facts('Sure! {"facts": [{"content": "C"}]} hope that helps')] == ["C"]
    assert [f.content for f in parse_facts('{"content": "D", "sensitivity": "none"}')] == ["D"]


@pytest.mark.parametrize(
    ("label", "expected"),
    [(None, "none"), ("None", "none"), ("PUBLIC", "none"), ("Personal Data", "pii"), ("confidential", "sensitive"),
     ("weird-label", "sensitive"), ("low", "low")],
)  # fmt: skip
def test_sensitivity_normalisation_fails_closed(label: object, expected: str) -> None:
    """Synonyms map to the four classes; an unknown label is treated as sensitive."""
    assert normalise_sensitivity(label) == expected


def test_malformed_entries_are_skipped_and_values_clamped() -> None:
    raw = json.dumps(
        {
            "facts": [
                {"content": ""},
                {"no": "content"},
                7,
                {"content": "ok", "importance": 7},
                {"content": "nan", "importance": "x"},
            ]
        }
    )
    facts = parse_facts(raw)
    assert [(f.content, f.importance) for f in facts] == [("ok", 1.0), ("nan", 0.6)]


@pytest.mark.parametrize("raw", ["", "not json at all", "```\n```", "[1, 2", None, 42, '{"facts": "nope"}'])
def test_unreadable_replies_give_no_facts(raw: object) -> None:
    assert parse_facts(raw) == []


def test_fact_count_and_length_are_bounded() -> None:
    raw = json.dumps([{"content": "x" * 5000}] * 100)
    facts = parse_facts(raw, max_facts=3, max_chars=100)
    assert len(facts) == 3 and all(len(f.content) == 100 for f in facts)


# -- turn codec ---------------------------------------------------------------------------


def _as_stored(payload: str, seq: int) -> str:
    """What the append script stores: ``{"seq":<n>,`` spliced in front of the payload."""
    return '{"seq":' + str(seq) + "," + payload[1:]


def test_turn_roundtrip_with_seq_splice() -> None:
    tools = parse_tool_results(
        [{"tool_name": "search", "params": {"q": "x"}, "result": [1, 2], "duration_ms": 5}]
    )
    payload = encode_turn("id1", "héllo", "wörld", tools, 1700000000.5, 7)
    assert payload.startswith('{"id"')
    turn = decode_turn(_as_stored(payload, 12).encode(), "th")
    assert turn == Turn("id1", "th", "héllo", "wörld", tools, 1700000000.5, 7, 12)
    assert turn.time.year == 2023


@pytest.mark.parametrize("raw", [b"garbage", b"[]", b'{"no_id": 1}', b"\xff\xfe"])
def test_undecodable_turns_are_none(raw: bytes) -> None:
    assert decode_turn(raw, "t") is None


@pytest.mark.parametrize(
    "value",
    [
        "not a list",
        [{"tool_name": ""}],
        [{"tool_name": "x", "params": "p"}],
        [{"tool_name": "x", "success": "yes"}],
        [{"tool_name": "x", "duration_ms": -1}],
        [{"tool_name": "x", "result": object()}],
        [{"tool_name": "x", "extra": 1}],
        [42],
    ],
)
def test_bad_tool_results_are_validation_errors(value: object) -> None:
    with pytest.raises(ValidationError):
        parse_tool_results(value)


def test_tool_result_objects_accepted() -> None:
    tr = ToolResult("calc", {"a": 1}, 3, True, 2)
    assert parse_tool_results([tr]) == (tr,)
    assert parse_tool_results(None) == ()


# -- tokens -------------------------------------------------------------------------------


def test_heuristic_counter() -> None:
    """ceil(chars / 4), but never fewer tokens than words."""
    c = HeuristicTokenCounter()
    assert c.count("") == 0
    assert c.count("abcdefgh") == 2
    assert c.count("a b c d e f") == 6
    assert c.count("x" * 401) == 101


def test_count_tokens_refuses_a_broken_counter() -> None:
    class Bad:
        def count(self, text: str) -> int:
            return -1

    with pytest.raises(ConfigurationError):
        count_tokens(Bad(), "x")
    with pytest.raises(ConfigurationError):
        HeuristicTokenCounter(0)


# -- extractive summariser ------------------------------------------------------------------


def _turn(i: int, user: str, assistant: str) -> Turn:
    return Turn(f"id{i}", "t", user, assistant, seq=i)


def test_extractive_summary_keeps_each_request_and_is_bounded() -> None:
    turns = [
        _turn(
            1, "Book a flight to Lisbon. I need it Friday.", "Flights to Lisbon on Friday start at 90 EUR."
        ),
        _turn(
            2, "What about hotels in Lisbon? Cheap ones.", "Hotels in Lisbon from 60 EUR. Alfama is central."
        ),
        _turn(3, "Thanks! Also rent a car.", "Car rental in Lisbon costs 30 EUR a day."),
    ]
    s = ExtractiveSummarizer(max_chars=300)
    text = s.summarize_sync(turns)
    assert len(text) <= 300
    for request in ("Book a flight to Lisbon.", "What about hotels in Lisbon?", "Thanks!"):
        assert request in text
    assert text == s.summarize_sync(turns)  # deterministic
    assert text.index("Book a flight") < text.index("hotels in Lisbon?")  # conversation order


def test_extractive_summary_of_nothing_is_empty() -> None:
    assert ExtractiveSummarizer().summarize_sync([]) == ""
    with pytest.raises(ConfigurationError):
        ExtractiveSummarizer(max_chars=5)


def test_transcript_clips_long_messages() -> None:
    text = transcript([_turn(1, "u" * 50, "a")], max_chars_per_message=10)
    assert text.splitlines()[0] == "User: " + "u" * 9 + "…"
