"""The pure core: key names, escaping, query building, records, reply parsing, scoring, budgets.

No I/O here: every module is checked by unit tests without a server.
"""
