"""Key ranges: the key space of a table, split into parts the engines aggregate over.

A row's position is its key itself when the key is one integer column (so a range is a
key range the source's primary-key index serves), else the first 32 bits of the md5 of
its key's canonical text (composite and text keys: no collation question, and the
positions spread evenly). A range is inclusive at both ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True, order=True)
class KeyRange:
    lo: int
    hi: int

    def __post_init__(self) -> None:
        if self.hi < self.lo:
            raise ValueError(f"empty key range [{self.lo}, {self.hi}]")

    @property
    def size(self) -> int:
        return self.hi - self.lo + 1

    def split(self, parts: int) -> list[KeyRange]:
        """At most `parts` ranges, as equal in width as integers allow, covering this one."""
        if parts < 2:
            raise ValueError("a range splits into 2 parts or more")
        count = min(parts, self.size)
        bounds = [self.lo + (self.size * i) // count for i in range(count + 1)]
        return [KeyRange(bounds[i], bounds[i + 1] - 1) for i in range(count)]

    def __str__(self) -> str:
        return str(self.lo) if self.lo == self.hi else f"{self.lo}..{self.hi}"


def merged(ranges: Sequence[KeyRange]) -> list[KeyRange]:
    """The same positions in as few ranges as possible (adjacent ones joined)."""
    out: list[KeyRange] = []
    for r in sorted(ranges):
        if out and r.lo <= out[-1].hi + 1:
            out[-1] = KeyRange(out[-1].lo, max(out[-1].hi, r.hi))
        else:
            out.append(r)
    return out


def range_filter(position_sql: str, ranges: Sequence[KeyRange]) -> str:
    """A WHERE condition: the position lies in one of `ranges`."""
    if not ranges:
        return "1 = 0"
    parts = [f"{position_sql} = {r.lo}" if r.lo == r.hi else f"{position_sql} between {r.lo} and {r.hi}"
             for r in merged(ranges)]
    return "(" + " or ".join(parts) + ")"


def range_index(position_sql: str, ranges: Sequence[KeyRange]) -> str:
    """A CASE giving the index in `ranges` of the range a row's position lies in (NULL if none)."""
    if not ranges:
        return "cast(null as int)"
    whens = " ".join(f"when {position_sql} between {r.lo} and {r.hi} then {i}" for i, r in enumerate(ranges))
    return f"case {whens} end"
