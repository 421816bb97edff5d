"""`python -m verify` on the real stack: silver reconciled with PostgreSQL and MariaDB.

It runs right after test_cdc_end_to_end.py, on the lakehouse that module landed and
built from every change it made (conftest's `e2e_lake`), and reconciles the silver
tables that cover every type verify canonicalises: char(n) padding (language),
decimals, arrays, enums, tsvector, unchanged-TOAST text and bytes (film, staff), dates
and derived columns (customer), ranges and timestamptz (rental), a composite key
(film_category), and MariaDB's movies. Then:

1. the lake as built is in sync: exit 0, every table's row counts those of the source;
2. a silver row corrupted and two rows silver keeps that the source does not have (a
   missed delete, one of them under a composite key) are named, with the changed
   column, as real differences (exit 5); silver restored, they are gone;
3. changes made in the sources but not landed yet are named too, as lag (exit 6);
4. a runner pass that lands them (from where the shared lakehouse's landing stopped) and
   builds those tables, with its `--verify` step, ends in sync (exit 0), in the test's
   own process: Derby admits one process per metastore.

The expectations come from what each test changes, never from verify's output.
PostgreSQL's WAL is read through pg_walinspect, which the superuser installs here and
grants to the role verify connects as (docs/how-to/verify-the-lake.md).
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import psycopg
import pymysql
import pytest

from tests.support.lakehouse import dbt
from verify.cli import main as verify

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("e2e_lake")]

PAGILA = ("actor", "language", "film", "film_category", "staff", "customer", "rental")
TABLES = (*PAGILA, "movies")
MISSING_MOVIE = 424242
MISSING_FILM_CATEGORY = {"film_id": 1, "category_id": 9999}


@pytest.fixture(scope="module")
def lake(spark, cdc_stack, e2e_lake):
    """The tables above as test_cdc_end_to_end.py left them, all built; pg_walinspect for
    verify's role."""
    import stack

    built = {row[1] for row in spark.sql("show tables in silver").collect()}
    assert set(TABLES) <= built, f"silver lacks {sorted(set(TABLES) - built)}: run test_cdc_end_to_end.py first"
    user = cdc_stack.credentials.pg_user
    stack.psql("create extension if not exists pg_walinspect; "
               f'grant execute on function pg_get_wal_records_info(pg_lsn, pg_lsn) to "{user}";')
    yield e2e_lake
    stack.psql("drop extension if exists pg_walinspect;")


def run_verify(run_dir: Path, name: str, *tables: str) -> tuple[int, dict]:
    path = run_dir / "verify" / f"{name}.json"
    code = verify([*(f"--table={t}" for t in tables), "--json", str(path)])
    return code, json.loads(path.read_text())


def differences(document: dict) -> dict[str, dict[str, list]]:
    """Per table with differences: kind -> [(key, columns)]."""
    found = {}
    for table in document["tables"]:
        kinds = {kind: [(item["key"], item.get("columns")) for item in items]
                 for kind, items in table.get("differences", {}).items() if items}
        if kinds:
            found[table["model"]] = kinds
    return found


def source_count(info, table: str) -> int:
    if table == "movies":
        conn = pymysql.connect(**info.mariadb_connect_args)
        try:
            with conn.cursor() as cur:
                cur.execute("select count(*) from movies")
                return cur.fetchone()[0]
        finally:
            conn.close()
    with psycopg.connect(info.pg_dsn) as conn:
        return conn.execute(f"select count(*) from public.{table}").fetchone()[0]  # noqa: S608 - fixed names


def test_the_lake_as_built_is_in_sync(lake, spark, cdc_stack, run_dir):
    code, document = run_verify(run_dir, "in-sync", *TABLES)
    tables = {t["model"]: t for t in document["tables"]}
    assert code == 0, json.dumps(document, indent=1)[:4000]
    assert sorted(tables) == sorted(TABLES)
    for name, table in tables.items():
        assert table["status"] == "in sync", table
        assert table["position"]["silver"] == "at", table
        assert table["not_compared"] == {}, table
        silver_rows = spark.sql(f"select count(*) from silver.{name}").first()[0]
        assert table["rows"] == {"source": source_count(cdc_stack, name), "silver": silver_rows}, name
    engines = {s["engine"]: s for s in document["sources"]}
    assert set(engines) == {"postgresql", "mariadb"}
    for source in engines.values():
        assert re.match(r"log after silver's position read: 0 change", source["log"]) or "at or before" in source["log"]


def settle_state_tables(spark, models) -> None:
    """Rows written to the state tables by hand reach the views with a build, which
    publishes them (docs/decisions/silver-atomic-reads.md): told to build without new
    bronze data (var cdc_publish)."""
    dbt("run", "--select", *models, "--vars", json.dumps({"cdc_publish": True}))


def test_a_corrupted_row_and_missed_deletes_are_named(lake, spark, cdc_stack, run_dir):
    film_id, rate = spark.sql("select film_id, rental_rate from silver.film order by film_id limit 1 offset 6").first()
    conn = pymysql.connect(**cdc_stack.mariadb_connect_args)
    try:
        with conn.cursor() as cur:
            cur.execute("select count(*) from movies where movie_id = %s", (MISSING_MOVIE,))
            assert cur.fetchone()[0] == 0
    finally:
        conn.close()
    with psycopg.connect(cdc_stack.pg_dsn) as pg:
        assert pg.execute("select count(*) from film_category where film_id = %(film_id)s and "
                          "category_id = %(category_id)s", MISSING_FILM_CATEGORY).fetchone()[0] == 0
    # silver's rows live in the state tables its views read (rows flagged _cdc_deleted are left out),
    # written here by hand, then settled into the base files the views read
    spark.sql(f"update silver.film__cdc_state set rental_rate = rental_rate + 10 where film_id = {film_id}")
    order = "00000000000000000000|mariadb-bin.000001|00000000000000000004|0000000000|0000000000|00000000000000000000"
    spark.sql("insert into silver.movies__cdc_state (movie_id, title, release_year, country, _cdc_op, _cdc_order, "
              f"_cdc_source_ts, _cdc_commit_time, _cdc_deleted) values ({MISSING_MOVIE}, 'Deleted upstream', 1999, "
              f"null, 'c', '{order}', timestamp '2026-01-01 00:00:00', '0', false)")
    spark.sql("insert into silver.film_category__cdc_state (film_id, category_id, last_update, _cdc_op, _cdc_order, "
              f"_cdc_source_ts, _cdc_commit_time, _cdc_deleted) values ({MISSING_FILM_CATEGORY['film_id']}, "
              f"{MISSING_FILM_CATEGORY['category_id']}, timestamp '2026-01-01 00:00:00', 'c', '00000000000000000001|"
              "|00000000000000000000|0000000000|0000000000|00000000000000000000', timestamp '2026-01-01 00:00:00', "
              "'0', false)")
    settle_state_tables(spark, ("film", "movies", "film_category"))
    code, document = run_verify(run_dir, "corrupted", *TABLES)
    assert code == 5, json.dumps(document, indent=1)[:4000]
    assert differences(document) == {
        "film": {"changed": [({"film_id": film_id}, ["rental_rate"])]},
        "movies": {"extra_in_silver": [({"movie_id": MISSING_MOVIE}, None)]},
        "film_category": {"extra_in_silver": [(MISSING_FILM_CATEGORY, None)]},
    }
    assert {t["model"]: t["position"]["silver"] for t in document["tables"]
            if t["model"] in ("film", "movies", "film_category")} == dict.fromkeys(("film", "movies", "film_category"),
                                                                                   "at")
    # restored as the state tables hold a delete: the row flagged, the view leaves it out
    spark.sql(f"update silver.film__cdc_state set rental_rate = {rate} where film_id = {film_id}")
    spark.sql(f"update silver.movies__cdc_state set _cdc_deleted = true where movie_id = {MISSING_MOVIE}")
    spark.sql("update silver.film_category__cdc_state set _cdc_deleted = true where "
              f"film_id = {MISSING_FILM_CATEGORY['film_id']} and category_id = {MISSING_FILM_CATEGORY['category_id']}")
    settle_state_tables(spark, ("film", "movies", "film_category"))
    code, document = run_verify(run_dir, "restored", "film", "movies", "film_category")
    assert code == 0 and differences(document) == {}, json.dumps(document, indent=1)[:4000]


def test_source_changes_not_landed_yet_are_lag(lake, cdc_stack, run_dir):
    with psycopg.connect(cdc_stack.pg_dsn, row_factory=psycopg.rows.dict_row) as pg:
        before = pg.execute("select * from actor where actor_id = 2").fetchone()
        pg.execute("update actor set first_name = 'VERIFY' where actor_id = 2")
        pg.commit()
        after = pg.execute("select * from actor where actor_id = 2").fetchone()
    conn = pymysql.connect(**cdc_stack.mariadb_connect_args, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("update movies set title = concat(title, ' (verify)') where movie_id = 3")
    finally:
        conn.close()
    changed_actor = sorted(c for c in before if before[c] != after[c])  # last_update too: Pagila's trigger
    code, document = run_verify(run_dir, "lag", "actor", "movies")
    assert code == 6, json.dumps(document, indent=1)[:4000]
    found = differences(document)
    assert {model: {kind: [(key, sorted(columns)) for key, columns in items] for kind, items in kinds.items()}
            for model, kinds in found.items()} == {
        "actor": {"changed": [({"actor_id": 2}, changed_actor)]},
        "movies": {"changed": [({"movie_id": 3}, ["title"])]},
    }
    for table in document["tables"]:
        assert table["position"]["silver"] == "behind" and table["position"]["changes_after_reached"] == 1, table


def test_the_runner_s_verify_step_after_a_pass_that_lands_the_lag(lake, spark, cdc_stack, run_dir):
    import stack
    from runner.cli import main as runner

    stack.wait_caught_up(lake.topic_pattern)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:  # the runner installs its own stop handlers; pytest's come back after
        code = runner(["--once", "--kafka-bootstrap-servers", cdc_stack.kafka_bootstrap,
                       "--topic-pattern", lake.topic_pattern, "--checkpoint", str(lake.checkpoint),
                       "--dbt-arg=--select", "--dbt-arg=actor", "--dbt-arg=movies", "--verify",
                       "--verify-arg=--table=actor", "--verify-arg=--table=movies",
                       f"--verify-arg=--json={run_dir / 'verify' / 'runner.json'}"])
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    document = json.loads((run_dir / "verify" / "runner.json").read_text())
    assert code == 0 and differences(document) == {}, json.dumps(document, indent=1)[:4000]
    assert spark.sql("select first_name from silver.actor where actor_id = 2").first()[0] == "VERIFY"
