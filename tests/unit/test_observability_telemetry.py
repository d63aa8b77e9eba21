"""Telemetry: off by default, DO_NOT_TRACK wins, and what is sent carries nothing identifying.

The capture endpoint is a local stdlib HTTP server on 127.0.0.1; nothing leaves
the machine.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from betterdb_memory._version import __version__
from betterdb_memory.observability.telemetry import Telemetry, bucket_count, do_not_track, opted_out

KEY = "phc_test_key_not_real"


class _Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[bytes] = []
        self.paths: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Collector

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.server.bodies.append(self.rfile.read(length))
        self.server.paths.append(self.path)
        payload = b'{"status": 1}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[_Collector]:
    server = _Collector()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DO_NOT_TRACK", "BETTERDB_TELEMETRY", "BETTERDB_TELEMETRY_KEY", "BETTERDB_TELEMETRY_HOST"):
        monkeypatch.delenv(name, raising=False)
    # PostHog reads these for its wire format; pin the default (JSON to /batch/).
    monkeypatch.delenv("POSTHOG_CAPTURE_MODE", raising=False)
    monkeypatch.delenv("POSTHOG_CAPTURE_COMPRESSION", raising=False)


def _events(collector: _Collector) -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    for body in collector.bodies:
        payload = json.loads(body)
        events.extend(payload.get("batch", [payload]))
    return events


def _scalars(node: object) -> set[object]:
    """Every key and scalar value in a decoded JSON document."""
    if isinstance(node, dict):
        return set(node) | {x for v in node.values() for x in _scalars(v)}
    if isinstance(node, list):
        return {x for v in node for x in _scalars(v)}
    return {node}


def test_off_by_default_sends_nothing(collector: _Collector) -> None:
    """Telemetry() and from_env() with nothing set send nothing, even with a key and host available."""
    for telemetry in (
        Telemetry(),
        Telemetry(api_key=KEY, host=collector.url),
        Telemetry.from_env({"BETTERDB_TELEMETRY_KEY": KEY, "BETTERDB_TELEMETRY_HOST": collector.url}),
    ):
        assert not telemetry.active
        telemetry.capture("store.opened", {"memories": 3})
        telemetry.close()
    time.sleep(0.2)
    assert collector.bodies == []


def test_enabled_without_key_sends_nothing(collector: _Collector) -> None:
    """No key, no sending: there is no baked-in key to fall back on."""
    telemetry = Telemetry(enabled=True, host=collector.url)
    assert not telemetry.active
    telemetry.capture("store.opened")
    telemetry.close()
    assert collector.bodies == []


@pytest.mark.parametrize("value", ["1", "true", "yes", "anything"])
def test_do_not_track_wins_over_enabled(
    collector: _Collector, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """DO_NOT_TRACK set to a truthy value silences even enabled=True with a key (posthog never loads)."""
    monkeypatch.setenv("DO_NOT_TRACK", value)
    telemetry = Telemetry(enabled=True, api_key=KEY, host=collector.url)
    assert not telemetry.active
    telemetry.capture("store.opened", {"memories": 3})
    assert telemetry._client is None
    telemetry.close()
    env_built = Telemetry.from_env(
        {
            "BETTERDB_TELEMETRY": "1",
            "BETTERDB_TELEMETRY_KEY": KEY,
            "BETTERDB_TELEMETRY_HOST": collector.url,
            "DO_NOT_TRACK": value,
        }
    )
    assert not env_built.enabled
    time.sleep(0.2)
    assert collector.bodies == []


@pytest.mark.parametrize(("value", "expected"), [("", False), ("0", False), ("false", False), ("1", True)])
def test_do_not_track_values(value: str, expected: bool) -> None:
    """Empty and explicit 'no' values do not opt out; any other value does."""
    assert do_not_track({"DO_NOT_TRACK": value}) is expected


def test_enabled_event_arrives_without_identifying_fields(collector: _Collector) -> None:
    """Enabled with key and host: one event arrives with only name, versions, engine and bucketed counts."""
    telemetry = Telemetry.from_env(
        {
            "BETTERDB_TELEMETRY": "yes",
            "BETTERDB_TELEMETRY_KEY": KEY,
            "BETTERDB_TELEMETRY_HOST": collector.url,
        },
        engine="valkey-search",
    )
    assert telemetry.active
    telemetry.capture(
        "store.opened",
        {
            "memories": 1234,
            "thread_id": "t-secret-thread",  # a string: dropped
            "content": "the user's secret",  # dropped
            "Bad Key": 3,  # not a short lower-case key: dropped
            "hostname": socket.gethostname(),  # dropped
        },
    )
    telemetry.capture("Not A Valid Event Name")  # dropped before queueing
    telemetry.close()  # flushes PostHog's queue and joins its thread

    deadline = time.monotonic() + 5
    while not collector.bodies and time.monotonic() < deadline:
        time.sleep(0.05)
    events = _events(collector)
    assert [e["event"] for e in events] == ["store.opened"]
    (event,) = events
    props = event["properties"]
    assert isinstance(props, dict)
    assert props["library_version"] == __version__
    assert props["python_version"].count(".") == 1
    assert props["engine"] == "valkey-search"
    assert props["memories"] == "1000-9999"
    assert set(props) <= {
        "library_version",
        "python_version",
        "engine",
        "memories",
        "$process_person_profile",
        "$geoip_disable",
    }
    assert event["distinct_id"] == telemetry.install_id
    raw = b"".join(collector.bodies).decode()
    for forbidden in ("t-secret-thread", "secret", "$os", "$python_runtime", "$lib"):
        assert forbidden not in raw
    # The pid is checked as a value, not as a substring: the body is full of random digits
    # (uuids, timestamps), and a 3-digit pid turned up in them in about 1 run in 30.
    pid = os.getpid()
    assert pid not in _scalars(events) and str(pid) not in _scalars(events)
    hostname = socket.gethostname()
    if len(hostname) >= 4:
        assert hostname not in raw


def test_install_id_is_random_not_host_derived() -> None:
    """Two Telemetry objects on one host get different uuid4 ids."""
    a, b = Telemetry(), Telemetry()
    assert a.install_id != b.install_id
    assert len(a.install_id) == 36


def test_capture_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing PostHog client is swallowed by capture."""

    class Boom:
        def capture(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("network down")

    telemetry = Telemetry(enabled=True, api_key=KEY, host="http://127.0.0.1:9")
    monkeypatch.setattr(telemetry, "_client", Boom())
    telemetry.capture("store.opened", {"memories": 1})


@pytest.mark.parametrize(
    ("n", "bucket"),
    [(0, "0"), (1, "1-9"), (9, "1-9"), (10, "10-99"), (999_999, "100000-999999"), (10**7, "1000000+")],
)
def test_counts_are_bucketed(n: int, bucket: str) -> None:
    """Counts are sent as orders of magnitude, never exact."""
    assert bucket_count(n) == bucket


@pytest.mark.parametrize("value", ["false", "0", "no", "off", "FALSE"])
def test_betterdb_telemetry_false_wins_over_enabled(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """The reference's documented opt-out, BETTERDB_TELEMETRY=false, also silences an opted-in store."""
    monkeypatch.setenv("BETTERDB_TELEMETRY", value)
    assert opted_out()
    telemetry = Telemetry(enabled=True, api_key=KEY, host="http://127.0.0.1:9")
    assert not telemetry.active
    telemetry.capture("store.opened")
    assert telemetry._client is None


def test_opt_in_reads_key_and_host_from_the_environment(collector: _Collector) -> None:
    """``analytics=True`` is ``Telemetry.opt_in()``: enabled, configured from the environment."""
    assert not Telemetry.opt_in({}).active  # no key: nothing to send to
    telemetry = Telemetry.opt_in({"BETTERDB_TELEMETRY_KEY": KEY, "BETTERDB_TELEMETRY_HOST": collector.url})
    assert telemetry.enabled and telemetry.active
    assert telemetry.host == collector.url
    telemetry.close()
    assert not opted_out({}) and not opted_out({"BETTERDB_TELEMETRY": "1"})
    assert opted_out({"DO_NOT_TRACK": "1"})
