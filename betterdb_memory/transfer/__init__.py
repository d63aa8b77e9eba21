"""Lossless export and import of a store, and re-embedding it in place with another model.

* ``export_store(store, file, vectors=False)`` writes JSONL (format version 1, see
  ``_format``): a header naming the store, model and dimension, then every memory
  document as stored (ids, times, access counts, TTL, every field), the fact history,
  L1 sessions and consolidation state, then an ``end`` row.
* ``import_store(store, lines)`` writes them back, under any store name, idempotently;
  without vectors (or from another model) the content is embedded again.
* ``reembed(store, embedder)`` moves a store to another model or dimension in place,
  resumably, keeping the index name, prefix and vector field (see ``reembed``).

Each takes ``progress=`` (``betterdb_memory.progress.Progress`` draws a bar).
"""

from __future__ import annotations

from ._format import FORMAT, FORMAT_VERSION, ExportHeader
from .export import ExportResult, export_store
from .load import ImportResult, import_store
from .reembed import ReembedResult, reembed

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ExportHeader",
    "ExportResult",
    "ImportResult",
    "ReembedResult",
    "export_store",
    "import_store",
    "reembed",
]
