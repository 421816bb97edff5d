"""The comparison itself, free of any engine: hashed key ranges narrowed down to keys.

Both sides answer the same three questions (`Side`): the whole table's row count and
hash (with the lowest and highest key position), the count and hash of each of a list of
key ranges, and the canonical rows of a list of ranges. A range whose count and hash
agree on both sides holds the same rows; one that differs is split again until it holds
at most `leaf_rows` rows, then its rows are fetched and diffed by key and column.
The hash of a range is the sum of its rows' 60-bit hashes (exact, so the order rows
come in does not matter).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Protocol, Sequence

from verify.ranges import KeyRange

MISSING = "missing in silver"
EXTRA = "extra in silver"
CHANGED = "changed"
DUPLICATE = "duplicate key"
# Differing ranges split per level at most (the first ones, in key order): each child is a
# CASE branch in the engines' queries; the rest are counted, not named.
MAX_SPLIT_RANGES = 256


@dataclass(frozen=True)
class RangeStats:
    rows: int
    hash: int


@dataclass(frozen=True)
class Totals:
    rows: int
    hash: int
    low: int | None  # lowest key position, None for an empty table
    high: int | None


@dataclass(frozen=True)
class CanonicalRow:
    """A row as canonical texts: its key's columns, and every compared column by name."""

    key: tuple[str | None, ...]
    values: dict[str, str | None]


class Side(Protocol):
    def totals(self) -> Totals: ...

    def stats(self, ranges: Sequence[KeyRange]) -> dict[int, RangeStats]:
        """Per index into `ranges`, for the ranges that hold rows."""
        ...

    def rows(self, ranges: Sequence[KeyRange]) -> list[CanonicalRow]: ...


@dataclass(frozen=True)
class KeyDifference:
    key: tuple[str | None, ...]
    kind: str  # MISSING, EXTRA, CHANGED, DUPLICATE
    columns: tuple[str, ...] = ()
    source: dict[str, str | None] | None = None
    silver: dict[str, str | None] | None = None


@dataclass
class Comparison:
    source_rows: int
    silver_rows: int
    ranges_compared: int = 1
    levels: int = 0
    differences: list[KeyDifference] = field(default_factory=list)
    # differing ranges left unexplored once `max_rows` rows were fetched, and their rows (source, silver)
    unexplored: list[tuple[KeyRange, int, int]] = field(default_factory=list)

    @property
    def in_sync(self) -> bool:
        return not self.differences and not self.unexplored and self.source_rows == self.silver_rows

    def count(self, kind: str) -> int:
        return sum(d.kind == kind for d in self.differences)


def diff_rows(source: Iterable[CanonicalRow], silver: Iterable[CanonicalRow]) -> list[KeyDifference]:
    """Keys only one side has, keys both have with other values (naming the columns), and
    keys a side holds more than once; sorted by key."""
    def by_key(rows: Iterable[CanonicalRow]) -> tuple[dict, set]:
        keyed, duplicates = {}, set()
        for row in rows:
            if row.key in keyed:
                duplicates.add(row.key)
            keyed[row.key] = row
        return keyed, duplicates

    want, source_duplicates = by_key(source)
    got, silver_duplicates = by_key(silver)
    found: list[KeyDifference] = []
    for key in sorted(set(want) | set(got), key=_sort_key):
        if key in source_duplicates or key in silver_duplicates:
            found.append(KeyDifference(key, DUPLICATE, (), None, None))
        elif key not in got:
            found.append(KeyDifference(key, MISSING, (), want[key].values, None))
        elif key not in want:
            found.append(KeyDifference(key, EXTRA, (), None, got[key].values))
        else:
            columns = tuple(c for c in want[key].values if want[key].values[c] != got[key].values.get(c))
            if columns:
                found.append(KeyDifference(key, CHANGED, columns,
                                           {c: want[key].values[c] for c in columns},
                                           {c: got[key].values.get(c) for c in columns}))
    return found


def _sort_key(key: tuple[str | None, ...]) -> tuple:
    """Numbers in numeric order, before texts; NULL first."""
    out = []
    for part in key:
        if part is None:
            out.append((0, 0, ""))
        elif part.lstrip("-").isdigit():
            out.append((1, int(part), ""))
        else:
            out.append((2, 0, part))
    return tuple(out)


def reconcile(source: Side, silver: Side, fanout: int = 16, leaf_rows: int = 256,
              max_rows: int = 20_000) -> Comparison:
    """Compare two sides by hashed key ranges and name the keys that differ.

    `fanout`: how many parts a differing range is split into; `leaf_rows`: a range with
    at most this many rows on each side is fetched and diffed; `max_rows`: how many rows
    (both sides together) may be fetched, after which differing ranges are only counted."""
    if fanout < 2 or leaf_rows < 1 or max_rows < 1:
        raise ValueError("fanout must be 2 or more, leaf_rows and max_rows 1 or more")
    mine, theirs = source.totals(), silver.totals()
    result = Comparison(source_rows=mine.rows, silver_rows=theirs.rows)
    if (mine.rows, mine.hash) == (theirs.rows, theirs.hash):
        return result
    lows = [t.low for t in (mine, theirs) if t.low is not None]
    highs = [t.high for t in (mine, theirs) if t.high is not None]
    pending: list[tuple[KeyRange, int, int]] = [(KeyRange(min(lows), max(highs)), mine.rows, theirs.rows)]
    leaves: list[tuple[KeyRange, int, int]] = []
    while pending:
        to_split = []
        for key_range, source_rows, silver_rows in sorted(pending):
            if max(source_rows, silver_rows) <= leaf_rows or key_range.size == 1:
                leaves.append((key_range, source_rows, silver_rows))
            elif len(to_split) < MAX_SPLIT_RANGES:
                to_split.append(key_range)
            else:
                result.unexplored.append((key_range, source_rows, silver_rows))
        if not to_split:
            break
        children = [child for key_range in to_split for child in key_range.split(fanout)]
        result.levels += 1
        result.ranges_compared += len(children)
        source_stats, silver_stats = source.stats(children), silver.stats(children)
        empty = RangeStats(0, 0)
        pending = [(child, source_stats.get(i, empty).rows, silver_stats.get(i, empty).rows)
                   for i, child in enumerate(children)
                   if source_stats.get(i, empty) != silver_stats.get(i, empty)]
    fetched, batch = 0, []
    for leaf in sorted(leaves):
        if fetched + leaf[1] + leaf[2] > max_rows and (batch or fetched):
            result.unexplored.append(leaf)
            continue
        batch.append(leaf[0])
        fetched += leaf[1] + leaf[2]
    if batch:
        result.differences = diff_rows(source.rows(batch), silver.rows(batch))
    return result
