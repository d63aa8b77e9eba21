"""The one error an adapter raises when its framework is not installed."""

from __future__ import annotations

from ..errors import ConfigurationError

__all__ = ["missing_extra"]


def missing_extra(adapter: str, extra: str, exc: ImportError) -> ConfigurationError:
    """A ``ConfigurationError`` naming the extra that brings ``adapter``'s framework.

    Args:
        adapter: what the user tried to import (``"the MCP server"``).
        extra: the extra to install (``"mcp"``).
        exc: the ``ImportError`` met; its module name goes into ``details``.
    """
    return ConfigurationError(
        f"{adapter} needs the '{extra}' extra; install it with: pip install 'betterdb-memory[{extra}]'"
        f" ({exc})",
        code="configuration.missing_extra",
        details={"extra": extra, "missing": [exc.name or "?"]},
    )
