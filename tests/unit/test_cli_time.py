"""The CLI's time arguments as the API takes them (``_cli_time.time_value``); no server."""

from __future__ import annotations

import pytest

from betterdb_memory._cli_time import time_value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("1714521600000", 1714521600000),  # epoch milliseconds
        (" 1714521600000 ", 1714521600000),
        ("0", 0),
        ("2024", "2024"),  # four digits: the year, not 2024 ms after 1970
        ("2024-05", "2024-05"),
        ("2024-05-01T09:30:00+02:00", "2024-05-01T09:30:00+02:00"),
        ("May 2024", "May 2024"),  # left to the store, which rejects it (validation.time_format)
    ],
)
def test_time_value(text: str | None, expected: object) -> None:
    assert time_value(text) == expected
