"""verify's key ranges and its hashed comparison, on sides held in memory (no Spark, no
database): the narrowing must find exactly the keys that differ, name the columns, and
ask for few ranges when the tables are alike."""

from __future__ import annotations

import hashlib
import random
from typing import Sequence

import pytest

from verify.compare import (
    CHANGED, DUPLICATE, EXTRA, MISSING, CanonicalRow, RangeStats, Totals, diff_rows, reconcile,
)
from verify.ranges import KeyRange, merged, range_filter, range_index


class MemorySide:
    """A side over rows {key: {column: text}} keyed by one integer column: position = key."""

    def __init__(self, rows: dict[int, dict[str, str | None]], duplicates: Sequence[int] = ()):
        self.data = [(k, v) for k, v in rows.items()] + [(k, rows[k]) for k in duplicates]
        self.calls: list[tuple[str, int]] = []

    @staticmethod
    def _hash(key: int, values: dict) -> int:
        return int(hashlib.md5(repr((key, sorted(values.items()))).encode()).hexdigest()[:15], 16)

    def totals(self) -> Totals:
        self.calls.append(("totals", 1))
        keys = [k for k, _ in self.data]
        return Totals(len(self.data), sum(self._hash(k, v) for k, v in self.data),
                      min(keys) if keys else None, max(keys) if keys else None)

    def stats(self, ranges: Sequence[KeyRange]) -> dict[int, RangeStats]:
        self.calls.append(("stats", len(ranges)))
        found: dict[int, RangeStats] = {}
        for key, values in self.data:
            for i, r in enumerate(ranges):
                if r.lo <= key <= r.hi:
                    old = found.get(i, RangeStats(0, 0))
                    found[i] = RangeStats(old.rows + 1, old.hash + self._hash(key, values))
                    break
        return found

    def rows(self, ranges: Sequence[KeyRange]) -> list[CanonicalRow]:
        self.calls.append(("rows", len(ranges)))
        return [CanonicalRow((str(k),), {"id": str(k), **v}) for k, v in self.data
                if any(r.lo <= k <= r.hi for r in ranges)]


def table(n: int, start: int = 1) -> dict[int, dict[str, str | None]]:
    return {k: {"name": f"name {k}", "price": f"{k % 97}.50"} for k in range(start, start + n)}


# --- ranges ---------------------------------------------------------------------------------
@pytest.mark.parametrize("lo, hi, parts", [(1, 100, 16), (0, 2**32 - 1, 16), (5, 7, 16), (-10, 10, 3), (3, 3, 2)])
def test_a_split_covers_the_range_once_in_near_equal_parts(lo, hi, parts):
    pieces = KeyRange(lo, hi).split(parts)
    assert pieces[0].lo == lo and pieces[-1].hi == hi
    assert all(a.hi + 1 == b.lo for a, b in zip(pieces, pieces[1:]))
    assert len(pieces) == min(parts, hi - lo + 1)
    assert max(p.size for p in pieces) - min(p.size for p in pieces) <= 1


def test_range_sql_names_each_range_and_merges_neighbours():
    ranges = [KeyRange(1, 5), KeyRange(6, 9), KeyRange(20, 20)]
    assert merged(ranges) == [KeyRange(1, 9), KeyRange(20, 20)]
    assert range_filter("p", ranges) == "(p between 1 and 9 or p = 20)"
    assert range_index("p", ranges) == "case when p between 1 and 5 then 0 when p between 6 and 9 then 1 " \
                                        "when p between 20 and 20 then 2 end"
    assert range_filter("p", []) == "1 = 0"
    with pytest.raises(ValueError):
        KeyRange(3, 2)


# --- diff_rows ------------------------------------------------------------------------------
def test_diff_rows_names_missing_extra_changed_and_duplicate_keys_in_key_order():
    def row(key, **values):
        return CanonicalRow((key,), values)

    source = [row("10", a="x", b="1"), row("2", a="y", b="2"), row("3", a="z", b=None), row("4", a="d", b="d")]
    silver = [row("2", a="y", b="2"), row("3", a="z", b="3"), row("11", a="q", b="q"),
              row("4", a="d", b="d"), row("4", a="d", b="d")]
    found = diff_rows(source, silver)
    assert [(d.key, d.kind, d.columns) for d in found] == [
        (("3",), CHANGED, ("b",)), (("4",), DUPLICATE, ()), (("10",), MISSING, ()), (("11",), EXTRA, ())]
    changed = found[0]
    assert changed.source == {"b": None} and changed.silver == {"b": "3"}


# --- reconcile ------------------------------------------------------------------------------
def test_equal_tables_cost_one_question_per_side():
    rows = table(5000)
    source, silver = MemorySide(rows), MemorySide(dict(rows))
    result = reconcile(source, silver)
    assert result.in_sync and result.ranges_compared == 1 and result.levels == 0
    assert source.calls == [("totals", 1)] and silver.calls == [("totals", 1)]


def test_the_narrowing_finds_exactly_the_keys_that_differ():
    rows = table(100_000)
    silver_rows = {k: dict(v) for k, v in rows.items()}
    silver_rows[4242]["price"] = "0.00"          # a corrupted value
    del rows[77_777]                              # a delete silver missed
    del silver_rows[123]                          # a row silver lacks
    silver_rows[200_000] = {"name": "new", "price": "9.50"}  # beyond the source's key range
    source, silver = MemorySide(rows), MemorySide(silver_rows)
    result = reconcile(source, silver, fanout=16, leaf_rows=64)
    assert [(d.key, d.kind, d.columns) for d in result.differences] == [
        (("123",), MISSING, ()), (("4242",), CHANGED, ("price",)), (("77777",), EXTRA, ()),
        (("200000",), EXTRA, ())]
    assert not result.in_sync and not result.unexplored
    assert (result.source_rows, result.silver_rows) == (99_999, 100_000)
    # few rows fetched: only the small ranges around the four keys
    fetched = [n for call, n in silver.calls if call == "rows"]
    assert fetched == [4]
    assert result.ranges_compared < 16 * 4 * 5


def test_a_fetch_budget_leaves_further_ranges_counted_not_named():
    rows = table(10_000)
    silver_rows = {k: {**v, "price": "changed"} for k, v in rows.items()}
    result = reconcile(MemorySide(rows), MemorySide(silver_rows), fanout=4, leaf_rows=100, max_rows=1000)
    assert 0 < len(result.differences) <= 500 and result.unexplored
    named = len(result.differences) + sum(a for _, a, _ in result.unexplored)
    assert named == 10_000
    assert all(d.kind == CHANGED and d.columns == ("price",) for d in result.differences)


def test_empty_sides_and_one_sided_tables():
    assert reconcile(MemorySide({}), MemorySide({})).in_sync
    result = reconcile(MemorySide(table(3)), MemorySide({}))
    assert [d.kind for d in result.differences] == [MISSING] * 3
    result = reconcile(MemorySide({}), MemorySide(table(2, start=50)))
    assert [(d.key, d.kind) for d in result.differences] == [(("50",), EXTRA), (("51",), EXTRA)]


def test_random_corruptions_are_all_found():
    generator = random.Random(55)
    for _ in range(20):
        rows = table(generator.randint(1, 3000), start=generator.randint(-50, 50))
        silver_rows = {k: dict(v) for k, v in rows.items()}
        keys = list(rows)
        expected = set()
        for key in generator.sample(keys, min(len(keys), generator.randint(0, 6))):
            action = generator.choice(["change", "drop", "add"])
            if action == "change":
                silver_rows[key]["name"] += "!"
                expected.add((str(key), CHANGED))
            elif action == "drop":
                del silver_rows[key]
                expected.add((str(key), MISSING))
            else:
                silver_rows[key + 10_000] = {"name": "x", "price": "1.50"}
                expected.add((str(key + 10_000), EXTRA))
        result = reconcile(MemorySide(rows), MemorySide(silver_rows), fanout=generator.choice([2, 4, 16]),
                           leaf_rows=generator.choice([1, 8, 256]))
        assert {(d.key[0], d.kind) for d in result.differences} == expected


def test_a_table_that_differs_everywhere_is_narrowed_within_bounds():
    from verify import compare

    rows = table(5_000)
    silver_rows = {k: {**v, "name": v["name"] + "!"} for k, v in rows.items()}
    silver = MemorySide(silver_rows)
    result = reconcile(MemorySide(rows), silver, fanout=16, leaf_rows=1, max_rows=100)
    assert max(n for call, n in silver.calls if call == "stats") <= compare.MAX_SPLIT_RANGES * 16
    assert len(result.differences) + sum(a for _, a, _ in result.unexplored) == 5_000
    assert 0 < len(result.differences) <= 100
