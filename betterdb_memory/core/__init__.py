"""The pure core: key names, escaping, query building, records, reply parsing, the engines'
dialect and FT.INFO, the live tunables, text tokens, ranking, scoring, budgets.

No I/O here: every module is checked by unit tests without a server, and imports only
the standard library, numpy and ``errors`` (tests/unit/test_layers.py).
"""
