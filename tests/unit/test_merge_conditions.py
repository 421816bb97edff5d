"""The project's MERGE INTO statements condition their WHEN clauses on the source's
columns only. Hudi 1.2.0 evaluates a clause condition that reads the target's columns
per record on a merge-on-read table, fails each record (ArrayIndexOutOfBoundsException in
ExpressionPayload.processMatchedRecord, logged only), and commits with nothing written
while the statement succeeds (apache/hudi#12180; observed here with two writers of one
table, docs/reference/limits.md). Reading the macros' text catches such a clause before
any table loses a write."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import ROOT

MERGE = re.compile(r"merge\s+into\s+(?:\{\{.*?\}\}|\S+)\s+as\s+(?P<target>\w+)\s+using\s+.*?\)?\s*as\s+(?P<source>\w+)\s+on\s",
                   re.IGNORECASE | re.DOTALL)
CLAUSE = re.compile(r"when\s+(?:not\s+)?matched\s+and\s+(?P<condition>.*?)\s+then\b", re.IGNORECASE | re.DOTALL)
QUALIFIED = re.compile(r"\b(\w+)\s*\.\s*`?\w")
WORD = re.compile(r"(?<![\w.'`])([A-Za-z_]\w*)\b(?!\s*\.)")
SQL_WORDS = {"and", "or", "not", "is", "null", "true", "false", "in", "like", "between"}


def merges() -> list[tuple[Path, str, str, list[str]]]:
    """(macro file, target alias, source alias, clause conditions) of every MERGE INTO."""
    found = []
    for path in sorted((ROOT / "macros").rglob("*.sql")):
        text = re.sub(r"\{#.*?#\}", "", path.read_text(), flags=re.DOTALL)
        starts = [m for m in MERGE.finditer(text)]
        for i, match in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
            body = text[match.end():end].split("endcall", 1)[0]
            found.append((path, match["target"], match["source"],
                          [c["condition"] for c in CLAUSE.finditer(body)]))
    return found


def test_every_merge_clause_condition_reads_the_source_only():
    statements = merges()
    assert len(statements) >= 3, f"expected the history, rejected and hudi_incremental MERGEs: {statements}"
    conditions = [c for _, _, _, cs in statements for c in cs]
    assert len(conditions) >= 5, statements
    for path, target, source, clauses in statements:
        for condition in clauses:
            qualifiers = set(QUALIFIED.findall(condition))
            assert qualifiers == {source}, \
                f"{path.name}: `{condition}` must read columns of the source {source} only; qualifiers: {qualifiers}"
            bare = {w for w in WORD.findall(re.sub(r"'[^']*'", "", condition)) if w.lower() not in SQL_WORDS}
            assert bare <= {source}, f"{path.name}: `{condition}` names {bare - {source}} unqualified (target {target}?)"


def test_the_check_catches_a_condition_on_the_target():
    text = """merge into t as stored using (select 1) as version on stored.k = version.k
              when matched and stored.ord < version.ord then update set *"""
    match = MERGE.search(text)
    condition = CLAUSE.search(text[match.end():])["condition"]
    assert set(QUALIFIED.findall(condition)) == {"stored", "version"} != {match["source"]}
