"""verify's reading of the project (which silver tables compare with a source, their keys
and declared types), its name checks, its canonical-text rules and its report."""

from __future__ import annotations

import json

import pytest

from verify.canonical import MariaDBDialect, PostgresDialect, SourceType, SparkDialect, can_compare, parse_type
from verify.compare import CHANGED, EXTRA, MISSING, Comparison, KeyDifference
from verify.errors import IdentifierError, ProjectError, UsageError
from verify.positions import AT, BEHIND, Verdict
from verify.ranges import KeyRange
from verify.report import (
    EXIT_BEHIND, EXIT_DIFFERENT, EXIT_ERROR, EXIT_IN_SYNC, Report, TableReport, render, to_json,
)
from verify.tables import check_identifier, load_tables, select_tables
from tests.support.paths import ROOT


def test_the_project_s_tables_their_keys_and_which_compare_by_default():
    tables = load_tables(ROOT)
    assert tables["film_actor"].key == ("actor_id", "film_id")
    assert tables["actor"].bronze == "pagila_public_actor" and tables["actor"].topic == "pagila.public.actor"
    assert [c.name for c in tables["movies"].columns] == ["movie_id", "title", "release_year", "country"]
    assert tables["film"].column("rental_rate").data_type == "decimal(4,2)"
    chosen, skipped = select_tables(tables, [])
    names = [t.model for t in chosen]
    assert {"actor", "film", "payment", "rental", "movies"} <= set(names) and names == sorted(names)
    assert set(skipped) == {"movies_including_deleted", "cdc_events", "products"}
    assert "query-based" in skipped["products"] and "soft" in skipped["movies_including_deleted"]
    assert [t.model for t in select_tables(tables, ["movies", "actor", "movies"])[0]] == ["movies", "actor"]
    with pytest.raises(UsageError, match="cdc_deletes: ignore"):
        select_tables(tables, ["cdc_events"])
    with pytest.raises(UsageError, match="no silver model"):
        select_tables(tables, ["nope"])


def test_names_that_are_not_plain_identifiers_never_reach_sql(tmp_path):
    assert check_identifier("table", "Film_1") == "Film_1"
    for bad in ("film; drop table x", "a.b", "1abc", "", "x" * 129, None):
        with pytest.raises(IdentifierError):
            check_identifier("table", bad)
    silver = tmp_path / "models" / "silver"
    silver.mkdir(parents=True)
    (silver / "_silver__sources.yml").write_text(
        "sources:\n  - name: bronze\n    tables:\n      - name: t\n        meta: {primary_key: [id]}\n")
    (silver / "t.sql").write_text("select * from {{ source('bronze', 't') }}")
    (silver / "_silver__models.yml").write_text(
        "models:\n  - name: t\n    columns:\n      - {name: id, data_type: int}\n"
        "      - {name: 'x`; drop', data_type: int}\n")
    with pytest.raises(IdentifierError, match="drop"):
        load_tables(tmp_path)
    (silver / "_silver__models.yml").write_text(
        "models:\n  - name: t\n    columns:\n      - {name: x, data_type: int}\n")
    with pytest.raises(ProjectError, match="key column"):
        load_tables(tmp_path)


def test_declared_types_and_which_engine_can_compare_them():
    assert parse_type("decimal(5,2)").scale == 2 and parse_type("decimal(10)").kind == "decimal"
    struct = parse_type("struct<lower:timestamp,upper:timestamp,lower_inclusive:boolean,upper_inclusive:boolean,"
                        "is_empty:boolean>")
    assert [name for name, _ in struct.fields] == ["lower", "upper", "lower_inclusive", "upper_inclusive", "is_empty"]
    assert parse_type("array<string>").element.kind == "string"
    assert parse_type("double").kind == "unsupported" and not parse_type("map<string,int>").supported
    assert parse_type("smallint").kind == "integer"
    tsrange = SourceType("tsrange", True, "timestamp without time zone")
    assert can_compare(PostgresDialect(), struct, tsrange)
    assert not can_compare(PostgresDialect(), struct, SourceType("record"))
    assert not can_compare(MariaDBDialect(), parse_type("array<string>"), None)
    assert can_compare(SparkDialect(), parse_type("array<int>"), None)
    # the timestamp's zone decides how PostgreSQL reads it: a timestamptz as its UTC wall clock
    assert "at time zone 'UTC'" in PostgresDialect().value('"t"', parse_type("timestamp"),
                                                          SourceType("timestamp with time zone"))
    assert "at time zone" not in PostgresDialect().value('"t"', parse_type("timestamp"),
                                                         SourceType("timestamp without time zone"))


def _table(model: str, differences=(), verdict_state=AT, error=None) -> TableReport:
    comparison = None if error else Comparison(3, 3 + sum(d.kind == EXTRA for d in differences),
                                               differences=list(differences))
    verdict = Verdict(verdict_state, "0/20", "0/10", 0 if verdict_state == AT else 2, "detail")
    return TableReport(model=model, source=f"postgresql db.public.{model}", key=("id",), integer_key=(True,),
                       comparison=comparison, verdict=verdict, error=error)


def test_exit_codes_and_what_the_report_says():
    changed = KeyDifference(("3",), CHANGED, ("price",), {"price": "0.99"}, {"price": "1.99"})
    extra = KeyDifference(("424242",), EXTRA, (), None, {"id": "424242"})
    assert Report([_table("a")]).exit_code == EXIT_IN_SYNC
    assert Report([_table("a"), _table("b", [changed, extra])]).exit_code == EXIT_DIFFERENT
    assert Report([_table("b", [changed], BEHIND)]).exit_code == EXIT_BEHIND
    assert Report([_table("b", [changed], BEHIND), _table("c", [extra])]).exit_code == EXIT_DIFFERENT
    assert Report([_table("a"), _table("e", error="boom")]).exit_code == EXIT_ERROR
    report = Report([_table("b", [changed, extra])], skipped={"products": "query-based"})
    text = render(report)
    assert "changed (columns): 1\n      id=3: price" in text and "extra in silver: 1\n      id=424242" in text
    assert "0.99" not in text  # values only with --show-values
    assert "products" in text and "exit 5" in text
    document = json.loads(json.dumps(to_json(report)))
    table = document["tables"][0]
    assert table["differences"]["changed"] == [{"key": {"id": 3}, "columns": ["price"]}]
    assert table["differences"]["extra_in_silver"] == [{"key": {"id": 424242}}]
    assert table["differences"][{MISSING: "missing_in_silver"}[MISSING]] == []
    assert document["exit_code"] == 5 and table["position"]["silver"] == "at"
    report.show_values = True
    assert "source 0.99 | silver 1.99" in render(report)
    assert to_json(report)["tables"][0]["differences"]["changed"][0]["silver"] == {"price": "1.99"}
    unexplored = Comparison(10, 10, unexplored=[(KeyRange(1, 5), 5, 5)])
    assert not unexplored.in_sync


def test_columns_the_source_lacks_yet_compare_as_null_and_unsupported_types_are_listed():
    from verify.lake import _texts
    from verify.tables import Column, TableSpec

    spec = TableSpec("rental", "pagila_public_rental", None, ("rental_id",), (
        Column("rental_id", "int"),
        Column("return_window", "struct<lower:timestamp,upper:timestamp,lower_inclusive:boolean,"
                                "upper_inclusive:boolean,is_empty:boolean>"),
        Column("score", "double"), Column("note", None)))
    not_compared: dict[str, str] = {}
    texts = _texts(spec, PostgresDialect(), {"rental_id": SourceType("integer")}, not_compared)
    assert texts == {"rental_id": '("rental_id")::text', "return_window": "null::text"}
    assert set(not_compared) == {"score", "note"}
    silver = _texts(spec, SparkDialect(), None, {})
    assert list(silver) == ["rental_id", "return_window"]
