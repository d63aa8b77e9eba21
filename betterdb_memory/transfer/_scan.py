"""What export and re-embedding share: the ids among scanned key names, and batch embedding.

Export and re-embedding visit every document, history document and state key of a
store. The index cannot list them all (history documents are outside it, valkey-search
1.0 caps a query at 10,000 results, and offsets over a large store are quadratic), so
they are found by name: ``Backend.scan`` (``SCAN`` with a ``MATCH`` pattern under the
store's prefix, on every primary of a cluster, each call retried). SCAN may return a
name twice; every caller here is idempotent per key. Needs the ``scan`` command in an ACL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..core.codec import encode_vector, validate_vector
from ..embedders.base import Embedder, validate_embeddings

__all__ = ["embed_encoded", "ids_under"]

# A memory id as ``core.keys.validate_memory_id`` accepts it: a name under a prefix that
# holds no such id (another store's key that happens to match the pattern) is skipped.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,199}")


def ids_under(names: Iterable[str], prefix: str, suffix: str = "") -> list[str]:
    """The memory ids of the key names ``<prefix><id><suffix>`` among ``names``."""
    out = []
    for name in names:
        if name.startswith(prefix) and name.endswith(suffix):
            mid = name[len(prefix) : len(name) - len(suffix)]
            if _ID.fullmatch(mid):
                out.append(mid)
    return out


async def embed_encoded(embedder: Embedder, texts: list[str]) -> list[bytes]:
    """``texts`` embedded and encoded as stored, checked and normalised exactly as the store's own writes.

    The same steps as ``Runtime.embed`` (``validate_embeddings``: shape, finite values,
    unit rows) so an imported or re-embedded vector is byte for byte what ``remember``
    would have written; a zero row is refused (``codec.validate_vector``).
    """
    matrix = validate_embeddings(
        await embedder.embed(texts),
        count=len(texts),
        dimensions=embedder.dimensions,
        model_id=embedder.model_id,
    )
    return [encode_vector(validate_vector(row, dimensions=embedder.dimensions)) for row in matrix]
