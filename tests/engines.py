"""The engines a test session may run on, and the optional valkey-search test engine.

The default session server is the embedded one (Valkey + RediSearch 2.10 from PyPI
wheels). ``make test-valkey-search`` runs the same suite against valkey-search from
``../shared/engines/valkey-search`` (a test engine of this project, absent on users'
machines) and says so in two variables:

* ``VALKEY_SEARCH_ENGINE``: the engine directory (also set for ``make test-cluster``);
* ``BETTERDB_TEST_ENGINE=valkey-search``: the session server (``VALKEY_URL``) runs it,
  so tests that start servers of their own (crash, restart) start that engine too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from betterdb_memory.server import Binaries

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ENGINE_DIR = ROOT.parent / "shared" / "engines" / "valkey-search"


def engine_dir() -> Path | None:
    """The valkey-search test engine's directory, or None when this machine has none."""
    configured = os.environ.get("VALKEY_SEARCH_ENGINE", "").strip()
    path = Path(configured) if configured else DEFAULT_ENGINE_DIR
    return (
        path.resolve() if (path / "start.sh").exists() and (path / "lib" / "libsearch.so").exists() else None
    )


def session_engine() -> str | None:
    """The engine the harness declared for the session server (``BETTERDB_TEST_ENGINE``), if any."""
    return os.environ.get("BETTERDB_TEST_ENGINE", "").strip() or None


def engine_binaries(workdir: Path) -> Binaries:
    """``Binaries`` for ``EmbeddedServer`` that run the test engine's Valkey with valkey-search.

    The engine's binaries run through its bundled loader and libraries (see its
    README), so the "server binary" is a two-line wrapper that execs the loader; the
    process keeps the wrapper's pid, so ``EmbeddedServer`` can stop and kill it.
    """
    engine = engine_dir()
    if engine is None:
        raise RuntimeError("the valkey-search test engine is not on this machine")
    lib = engine / "lib"
    wrapper = workdir / "valkey-server"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'exec "{lib}/ld-linux-x86-64.so.2" --library-path "{lib}" "{engine}/bin/valkey-server" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return Binaries(server=wrapper, search_module=lib / "libsearch.so")


def own_server_binaries(workdir: Path) -> Binaries | None:
    """What servers started by a test run: the session's engine when it is valkey-search, else embedded."""
    if session_engine() == "valkey-search" and engine_dir() is not None:
        return engine_binaries(workdir)
    return None
