"""Which server to use when the caller did not say: the environment's URL variables.

One pure function so that the CLI (and ``MemoryStore.connect``) read the same variables
in the same order, and so the order is unit-tested without touching ``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["URL_ENV_VARS", "resolve_url"]

# Most specific first: our own variable, then the one Valkey tooling (and this project's test
# harness) uses, then the one Redis-era deployments (Heroku, Render, Railway add-ons) already set.
URL_ENV_VARS: tuple[str, ...] = ("BETTERDB_MEMORY_URL", "VALKEY_URL", "REDIS_URL")


def resolve_url(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The server URL to connect to, or ``None`` for the embedded engine.

    Precedence: ``explicit`` > ``BETTERDB_MEMORY_URL`` > ``VALKEY_URL`` > ``REDIS_URL``.
    An empty or blank value counts as unset (``--url "$UNSET_VAR"`` or ``VALKEY_URL=`` in a
    compose file must not mean "connect to nothing"); values are returned stripped.

    Args:
        explicit: a URL the caller gave (``--url``, ``connect(url=...)``), if any.
        environ: the environment to read; ``os.environ`` by default.

    Returns:
        The first non-blank URL in precedence order, else ``None``.
    """
    if explicit is not None and explicit.strip():
        return explicit.strip()
    env = os.environ if environ is None else environ
    for var in URL_ENV_VARS:
        value = env.get(var, "").strip()
        if value:
            return value
    return None
