"""What the pipeline tests do to the lakehouse: run dbt in-process, read silver tables."""

from __future__ import annotations

from collections.abc import Sequence

from dbt.cli.main import dbtRunner

from tests.support.paths import ROOT


def dbt(*args: str) -> None:
    """`dbt <args>` on this project in the test's Spark session; fails the test if dbt fails."""
    result = dbtRunner().invoke([*args, "--project-dir", str(ROOT), "--profiles-dir", str(ROOT / "profiles")])
    assert result.success, f"dbt {' '.join(args)} failed: {result.exception or result.result}"


def silver_rows(spark, table: str, columns: Sequence[str], order_by: Sequence[str] = ()) -> list[dict]:
    """`columns` of silver.`table` as dicts (structs as dicts too), ordered by `order_by` if given."""
    select = ", ".join(f"`{c}`" for c in columns)
    order = f" order by {', '.join(f'`{c}`' for c in order_by)}" if order_by else ""
    return [row.asDict(recursive=True) for row in spark.sql(f"select {select} from silver.`{table}`{order}").collect()]
