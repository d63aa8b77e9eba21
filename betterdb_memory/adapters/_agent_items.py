"""Which L1 turns a run of OpenAI Agents SDK items makes: pure, no I/O, no SDK import.

The SDK's session holds Responses-API items: user messages, assistant messages,
function calls and their outputs, reasoning items, ... . The store's L1 tier holds
turns: one user message, one assistant reply, the tool calls made between them.
``plan_turns`` reads the items not yet folded into turns and says which turns they
complete and how many items those turns consume:

* A user message that follows anything but another user message starts a new turn;
  consecutive user messages are one turn's question (joined by a blank line).
* A turn's reply is its assistant messages' text, joined; its tool results pair each
  call (``function_call`` and the other ``*_call`` items) with its ``*_output`` item
  by ``call_id``, in call order, at most ``MAX_TOOL_RESULTS`` (the first ones).
* The last turn of the items is complete only when the last item is an assistant
  message: the SDK saves a run's items in steps (the input, then each model response
  and tool outputs), so until the reply arrives the turn stays open and its items stay
  unfolded, to be read again with the next ones.
* A turn closed by the next user message without any reply text uses its last tool
  output as the reply (a run that stopped at a tool); with neither, it makes no L1 turn
  (its items stay in the raw list, which ``get_items`` reads).
* Items before the first user message (system or developer messages, ...) make no turn.

Reasoning items, system messages and anything unknown are kept in the raw list only.
Text longer than the store's content limit is cut (at a character boundary) in the
turn; the raw item keeps all of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.turns import MAX_TOOL_RESULTS, ToolResult
from ..core.validation import MAX_CONTENT_BYTES

__all__ = ["TurnDraft", "item_kind", "message_text", "plan_turns"]


@dataclass(frozen=True, slots=True)
class TurnDraft:
    """One L1 turn to store: ``store_turn(thread, user, assistant, tool_results=tools)``."""

    user: str
    assistant: str
    tools: tuple[ToolResult, ...] = ()


def item_kind(item: Mapping[str, Any]) -> str:
    """``user``, ``assistant``, ``call``, ``output`` or ``other``."""
    kind = item.get("type")
    role = item.get("role")
    if kind in (None, "message") and role in ("user", "assistant"):
        return str(role)
    if isinstance(kind, str):
        if kind.endswith("_call_output") or kind.endswith("_output"):
            return "output"
        if kind.endswith("_call") and item.get("call_id") is not None:
            return "call"
    return "other"


def message_text(item: Mapping[str, Any]) -> str:
    """The text of a message item: its string content, or its parts' text joined by newlines.

    Parts without text (images, files, audio) count as ``[<type>]`` so that a message made
    of them alone is still a turn.
    """
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content if isinstance(content, Sequence) else ():
        if not isinstance(part, Mapping):
            continue
        text = part.get("text")
        if isinstance(text, str):
            parts.append(text)
        elif isinstance(part.get("refusal"), str):
            parts.append(part["refusal"])
        elif isinstance(part.get("type"), str):
            parts.append(f"[{part['type']}]")
    return "\n".join(p for p in parts if p)


def _clip(text: str) -> str:
    raw = text.encode("utf-8", "replace")
    if len(raw) <= MAX_CONTENT_BYTES:
        return text
    return raw[:MAX_CONTENT_BYTES].decode("utf-8", "ignore")


def _output_value(item: Mapping[str, Any]) -> Any:
    value = item.get("output")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return str(value)
    return value


def _params(item: Mapping[str, Any]) -> dict[str, Any]:
    raw = item.get("arguments", item.get("action", item.get("input")))
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {"arguments": raw}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    if isinstance(raw, Mapping):
        try:
            json.dumps(raw, allow_nan=False)
        except (TypeError, ValueError):
            return {"arguments": str(raw)}
        return {str(k): v for k, v in raw.items()}
    return {} if raw is None else {"arguments": str(raw)}


@dataclass
class _Open:
    """The turn being read: its question, replies and tool calls so far."""

    users: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)  # call_id -> index in tools
    tools: list[dict[str, Any]] = field(default_factory=list)
    last_output: str | None = None
    past_question: bool = False  # something other than a user message came after the question

    def draft(self) -> TurnDraft | None:
        user = "\n\n".join(u for u in self.users if u.strip())
        reply = "\n\n".join(r for r in self.replies if r.strip()) or (self.last_output or "")
        if not user.strip() or not reply.strip():
            return None
        tools = tuple(ToolResult(t["tool_name"], t["params"], t["result"], t["success"]) for t in self.tools)[
            :MAX_TOOL_RESULTS
        ]
        return TurnDraft(_clip(user), _clip(reply), tools)


def plan_turns(items: Sequence[Mapping[str, Any]]) -> tuple[list[TurnDraft], int]:
    """The turns ``items`` complete, and how many leading items they consume.

    Args:
        items: the session's items not yet folded into turns, oldest first.

    Returns:
        ``(turns, consumed)``: store ``turns`` in order, then mark ``consumed`` items folded;
        the rest (an open turn) is read again after the next ``add_items``.
    """
    turns: list[TurnDraft] = []
    consumed = 0
    turn = _Open()
    for index, item in enumerate(items):
        kind = item_kind(item)
        if kind == "user":
            if turn.past_question or not turn.users:
                # A new question: close what came before it (a turn, or items with no question).
                if turn.users and (draft := turn.draft()) is not None:
                    turns.append(draft)
                consumed, turn = index, _Open()
            turn.users.append(message_text(item))
            continue
        turn.past_question = bool(turn.users)
        if kind == "assistant":
            turn.replies.append(message_text(item))
        elif kind == "call":
            call_id = str(item.get("call_id"))
            turn.calls[call_id] = len(turn.tools)
            name = item.get("name") or item.get("type")
            turn.tools.append(
                {"tool_name": str(name), "params": _params(item), "result": None, "success": False}
            )
        elif kind == "output":
            value = _output_value(item)
            turn.last_output = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            at = turn.calls.get(str(item.get("call_id")))
            if at is not None:
                turn.tools[at].update(result=value, success=True)
            else:
                turn.tools.append(
                    {"tool_name": str(item.get("type")), "params": {}, "result": value, "success": True}
                )
    if items and item_kind(items[-1]) == "assistant" and turn.users:
        if (draft := turn.draft()) is not None:
            turns.append(draft)
        consumed = len(items)
    return turns, consumed
