"""Every script in ``examples/`` runs as a subprocess against the session server and prints what it promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(
    name: str, valkey_url: str, tmp_path: Path, **env_extra: str
) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<name>`` with VALKEY_URL set, no OpenAI settings and a throwaway XDG_DATA_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(VALKEY_URL=valkey_url, XDG_DATA_HOME=str(tmp_path / "xdg"), **env_extra)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_demo_prints_every_section(valkey_url: str, tmp_path: Path) -> None:
    """``make demo``'s script shows engine, facts, conversation, budget, recall, consolidation and metrics."""
    out = run_example("demo.py", valkey_url, tmp_path).stdout
    for section in (
        "== engine",
        "== facts injected (remember)",
        "== conversation",
        "== context for the next message, token_budget=",
        "== recall, explained",
        '== consolidation, mode="facts"',
        "== Prometheus metrics",
    ):
        assert section in out
    assert "utilisation" in out and "system reserve" in out
    assert "| distance threshold 0.90 |" in out  # a cosine-distance ceiling (similarity 0.55)
    assert "run 1: candidates=5 created=2 superseded=1 unchanged=0 current facts=1" in out
    assert "run 2: candidates=0 created=0 superseded=0 unchanged=0 current facts=1" in out
    assert "current    since 2024-05-01: Ada moved to Berlin in May 2024." in out
    assert "superseded since 2021-09-01: Ada lives in Lisbon." in out
    assert "agent_memory_remember_total" in out and "outcome=superseded" in out
    # The default recall answers Berlin: the newer statement of the home city ranks first (no subject).
    answer = out.split("Q: Where does Ada live?\n", 1)[1].splitlines()[0]
    assert answer.endswith("Ada moved to Berlin in May 2024."), answer
    assert "superseded by the newer statement of the same attribute: Ada moved to Berlin" in out
    assert "time window understood: 'in 2022' -> [2022-01-01T00:00:00.000Z, 2023-01-01T00:00:00.000Z)" in out
    assert "agent_memory_time_window_recalls_total{mode=filter}" in out


def test_quickstart(valkey_url: str, tmp_path: Path) -> None:
    """The quick start recalls what it remembered and assembles a context with memories and turns."""
    out = run_example("quickstart.py", valkey_url, tmp_path).stdout
    assert "memories stored: 3" in out
    assert "Ada lives in Lisbon." in out and "Ada is allergic to peanuts." in out
    assert "Relevant memories:" in out and "Recent conversation:" in out
    assert "erased 5 memories and turns" in out


def test_langchain_history(valkey_url: str, tmp_path: Path) -> None:
    """The history pairs human and AI messages into turns, works from a sync thread, and clears."""
    out = run_example("langchain_history.py", valkey_url, tmp_path).stdout
    assert "pending human message: 3 messages" in out
    assert "sync caller sees 6 messages" in out
    assert "human: Hi, I'm Ada." in out and "ai: Try the tile museum." in out
    assert "turns stored: 3" in out and "after clear: 0 messages" in out


def test_multi_tenant_isolation_holds(valkey_url: str, tmp_path: Path) -> None:
    """Every isolation check of the multi-tenant example passes, hostile ids included."""
    out = run_example("multi_tenant.py", valkey_url, tmp_path).stdout
    assert "LEAK" not in out and "isolation holds" in out
    assert "'alice}|@namespace:{globex': 1 hit(s), all its own" in out
    assert "'Alice': 1 hit(s), all its own" in out  # case-sensitive scopes
    assert "'alice ' refused (validation.whitespace)" in out
    assert "'alice,bob' refused (validation.comma)" in out
    assert "'alice*' refused (validation.wildcard)" in out
    assert "'al🙂ice': 1 hit(s), all its own" in out  # non-ASCII symbols find their own scope
    assert "nothing written by a refused call (8 -> 8 memories)" in out


def test_existing_server_doctor(valkey_url: str, tmp_path: Path) -> None:
    """The caller-owned client example passes every doctor check and leaves the client open."""
    out = run_example("existing_server.py", valkey_url, tmp_path).stdout
    assert f"examining {valkey_url}" in out
    assert "[FAIL]" not in out and "all checks passed" in out
    assert "[ok] client still open after store.close()" in out
    assert "[ok] count reads the index: 1 in the scope, 0 after forget" in out


def test_openai_agent_skips_without_key(valkey_url: str, tmp_path: Path) -> None:
    """Without OPENAI_API_KEY the OpenAI example says it skipped and exits 0."""
    proc = run_example("openai_agent.py", valkey_url, tmp_path)
    assert proc.stdout.strip() == (
        "OPENAI_API_KEY is not set: skipping the OpenAI agent example (nothing was run)."
    )


class _FakeOpenAI(BaseHTTPRequestHandler):
    """Chat completions: extraction requests get two facts, chat requests a canned reply."""

    requests: ClassVar[list[dict[str, Any]]] = []  # replaced per server by the fixture

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(body)
        if "response_format" in body:
            facts = [
                {"content": "The user is vegetarian.", "sensitivity": "low", "topic_tags": ["diet"], "importance": 0.8},
                {"content": "The user lives in Berlin.", "sensitivity": "pii", "topic_tags": ["home"], "importance": 0.9},
            ]  # fmt: skip
            content = json.dumps({"facts": facts})
        else:
            content = f"(fake reply to {len(body['messages'])} messages)"
        reply = {
            "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }  # fmt: skip
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_openai() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OpenAI-compatible endpoint on localhost: (base URL, requests it received)."""
    requests: list[dict[str, Any]] = []
    handler = type("Handler", (_FakeOpenAI,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", requests
    finally:
        server.shutdown()
        server.server_close()


def test_openai_agent_loop_uses_memory(
    valkey_url: str, tmp_path: Path, fake_openai: tuple[str, list[dict[str, Any]]]
) -> None:
    """With a key, facts extracted from session 1 reach the system prompt of session 2."""
    base_url, requests = fake_openai
    out = run_example(
        "openai_agent.py", valkey_url, tmp_path, OPENAI_API_KEY="test-key", OPENAI_BASE_URL=base_url
    ).stdout
    assert "- The user lives in Berlin.  (tags home, pii)" in out
    chats = [r for r in requests if "response_format" not in r]
    assert len(chats) == 3 and len(requests) == 4
    last_system = chats[-1]["messages"][0]["content"]
    assert "- The user lives in Berlin." in last_system
    assert chats[1]["messages"][1]["content"].startswith("Hi! I'm Ada.")  # session-1 turn replayed
