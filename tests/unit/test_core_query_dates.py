"""``core.query_dates``: the months, years and days a query names (the one time parser), as features."""

from __future__ import annotations

from betterdb_memory.core.query_dates import QueryDates, date_columns, query_dates

MAY_2023 = 1_683_504_000_000  # 2023-05-08T00:00:00Z
JUNE_2023 = 1_686_182_400_000  # 2023-06-08T00:00:00Z
MAY_2022 = 1_651_968_000_000  # 2022-05-08T00:00:00Z
NOW = 1_764_547_200_000  # 2025-12-01T00:00:00Z


def test_query_dates_reads_months_years_and_days_from_the_time_parser() -> None:
    named = query_dates("What did Melanie paint in May 2023?", NOW)
    assert (named.months, named.years, named.days) == ({5}, {2023}, ())
    named = query_dates("What did Gina find on 8 May, 2023?", NOW)
    assert (named.months, named.years) == ({5}, {2023})
    assert named.days == ((MAY_2023, MAY_2023 + 86_400_000),)
    # A month without a year resolves to its latest occurrence: the month counts, the year is that one.
    named = query_dates("When did Melanie go camping in June?", NOW)
    assert (named.months, named.years) == ({6}, {2025})
    assert query_dates("How many times in 2023?", NOW).months == frozenset()
    # Relative expressions count from as_of; vague ones and open bounds name nothing.
    assert query_dates("what happened last month", NOW).months == {11}
    assert not query_dates("What did Melanie paint recently?", NOW)
    assert not query_dates("What changed since March 2023?", NOW)
    assert not query_dates("What did Caroline paint?", NOW)
    assert not query_dates("may I ask what she painted", NOW)


def test_date_columns() -> None:
    dates = [MAY_2023, JUNE_2023, MAY_2022, MAY_2023 + 86_400_000]
    named = QueryDates(frozenset({5}), frozenset({2023}), ((MAY_2023, MAY_2023 + 86_400_000),))
    month, year, day = date_columns(named, dates)
    assert month == [1.0, 0.0, 1.0, 1.0]
    assert year == [1.0, 1.0, 0.0, 1.0]
    assert day == [1.0, 0.0, 0.0, 0.0]  # the window is half-open
    assert date_columns(QueryDates(frozenset(), frozenset(), ()), dates) == ([0.0] * 4,) * 3
    assert date_columns(named, []) == ([], [], [])
