"""The three queries of a comparison side, written once for every engine.

`TableSql` builds them from a dialect (verify.canonical), the relation, the key and the
canonical-text expression of every compared column; `SqlSide` runs them with the
engine's own `run` (a database cursor, or Spark) and answers verify.compare's `Side`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from verify.canonical import Dialect
from verify.compare import CanonicalRow, RangeStats, Totals
from verify.ranges import KeyRange, range_filter, range_index

Run = Callable[[str], list[tuple]]


@dataclass(frozen=True)
class TableSql:
    dialect: Dialect
    relation: str  # quoted, qualified
    key: tuple[str, ...]
    texts: dict[str, str]  # column -> SQL of its canonical text (key columns included), in compared order
    integer_key: bool  # one integer key column: positions are key values

    @property
    def position(self) -> str:
        if self.integer_key:
            return self.dialect.quote(self.key[0])
        return self.dialect.hash32(self.dialect.row_text([self.texts[k] for k in self.key]))

    @property
    def row_hash(self) -> str:
        return self.dialect.hash60(self.dialect.row_text(list(self.texts.values())))

    def totals(self) -> str:
        return (f"select count(*), sum(h), min(p), max(p) from "
                f"(select {self.row_hash} as h, {self.position} as p from {self.relation}) as t")

    def stats(self, ranges: Sequence[KeyRange]) -> str:
        return (f"select i, count(*), sum(h) from "
                f"(select {range_index(self.position, ranges)} as i, {self.row_hash} as h from {self.relation} "
                f"where {range_filter(self.position, ranges)}) as t where i is not null group by i")

    def rows(self, ranges: Sequence[KeyRange]) -> str:
        columns = [self.texts[k] for k in self.key] + list(self.texts.values())
        return (f"select {', '.join(columns)} from {self.relation} "
                f"where {range_filter(self.position, ranges)}")


class SqlSide:
    """A comparison side over one engine (verify.compare.Side)."""

    def __init__(self, sql: TableSql, run: Run):
        self.sql, self.run = sql, run

    def totals(self) -> Totals:
        rows, total, low, high = self.run(self.sql.totals())[0]
        return Totals(int(rows), int(total or 0), _integer(low), _integer(high))

    def stats(self, ranges: Sequence[KeyRange]) -> dict[int, RangeStats]:
        return {int(i): RangeStats(int(rows), int(total or 0)) for i, rows, total in self.run(self.sql.stats(ranges))}

    def rows(self, ranges: Sequence[KeyRange]) -> list[CanonicalRow]:
        width = len(self.sql.key)
        names = list(self.sql.texts)
        return [CanonicalRow(tuple(_text(v) for v in row[:width]), dict(zip(names, (_text(v) for v in row[width:]))))
                for row in self.run(self.sql.rows(ranges))]


def _integer(value: object) -> int | None:
    return None if value is None else int(value)


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    return str(value)
