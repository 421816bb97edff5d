"""What the pipeline tests do to the lakehouse: run dbt in-process, read silver tables,
drop what a test built."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dbt.cli.main import dbtRunner

from tests.support.paths import ROOT


def dbt(*args: str) -> Any:
    """`dbt <args>` on this project in the test's Spark session; fails the test if dbt
    fails, else returns dbt's result (e.g. `.results[0].node.compiled_code` of a compile)."""
    result = dbtRunner().invoke([*args, "--project-dir", str(ROOT), "--profiles-dir", str(ROOT / "profiles")])
    assert result.success, f"dbt {' '.join(args)} failed: {result.exception or result.result}"
    return result.result


def silver_rows(spark, table: str, columns: Sequence[str], order_by: Sequence[str] = ()) -> list[dict]:
    """`columns` of silver.`table` as dicts (structs as dicts too), ordered by `order_by` if given."""
    select = ", ".join(f"`{c}`" for c in columns)
    order = f" order by {', '.join(f'`{c}`' for c in order_by)}" if order_by else ""
    return [row.asDict(recursive=True) for row in spark.sql(f"select {select} from silver.`{table}`{order}").collect()]


def _warehouse(spark) -> Path:
    return Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))


def drop_tables(spark, tables: Iterable[tuple[str, str]]) -> None:
    """Drop (schema, table) pairs and their warehouse folders, so a table created again
    under the same name starts empty (Hudi keeps its timeline in the folder)."""
    for schema, table in tables:
        spark.sql(f"drop table if exists `{schema}`.`{table}` purge")
        shutil.rmtree(_warehouse(spark) / f"{schema}.db" / table, ignore_errors=True)


def drop_schemas(spark, schemas: Iterable[str]) -> None:
    """Drop whole schemas (databases) with their tables and warehouse folders."""
    for schema in schemas:
        spark.sql(f"drop database if exists `{schema}` cascade")
        shutil.rmtree(_warehouse(spark) / f"{schema}.db", ignore_errors=True)
    spark.catalog.clearCache()
