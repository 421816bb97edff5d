"""What the pipeline tests do to the lakehouse: run dbt in-process, read silver tables,
drop what a test built."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from dbt.cli.main import dbtRunner

from status import collect
from tests.support.paths import ROOT


def dbt_invoke(*args: str, project: Path = ROOT) -> Any:
    """`dbt <args>` on `project` (this one by default, with this project's profiles) in
    the test's Spark session; returns dbt's runner result, failed or not."""
    return dbtRunner().invoke([*args, "--project-dir", str(project), "--profiles-dir", str(ROOT / "profiles")])


def project_copy(tmp_path: Path) -> Path:
    """A copy of this dbt project (its YAML, macros, models and seeds) under `tmp_path`,
    for a test to change without touching the project."""
    project = tmp_path / "project"
    project.mkdir(parents=True)
    for name in ("dbt_project.yml", "selectors.yml", "macros", "models", "seeds"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, project / name)
    return project


def pruned_project(tmp_path: Path, keep: Iterable[str]) -> Path:
    """project_copy with only the models named in `keep`: the other models' SQL files
    and their entries in the YAML (models, unit tests, exposures that ref them) removed."""
    keep = set(keep)
    project = project_copy(tmp_path)
    for sql in (project / "models").rglob("*.sql"):
        if sql.stem not in keep:
            sql.unlink()
    for path in (project / "models").rglob("*.yml"):
        spec = yaml.safe_load(path.read_text())
        if "models" in spec:
            spec["models"] = [m for m in spec["models"] if m["name"] in keep]
        if "unit_tests" in spec:
            spec["unit_tests"] = [u for u in spec["unit_tests"] if u["model"] in keep]
        if "exposures" in spec:
            spec["exposures"] = [e for e in spec["exposures"]
                                 if set(re.findall(r"ref\('([a-z0-9_]+)'\)", " ".join(e.get("depends_on", [])))) <= keep]
        path.write_text(yaml.safe_dump({k: v for k, v in spec.items() if v != []}, sort_keys=False))
    (project / "selectors.yml").unlink()
    return project


def dbt(*args: str) -> Any:
    """`dbt <args>` on this project; fails the test if dbt fails, else returns dbt's
    result (e.g. `.results[0].node.compiled_code` of a compile)."""
    result = dbt_invoke(*args)
    assert result.success, f"dbt {' '.join(args)} failed: {result.exception or result.result}"
    return result.result


def silver_rows(spark, table: str, columns: Sequence[str], order_by: Sequence[str] = ()) -> list[dict]:
    """`columns` of silver.`table` as dicts (structs as dicts too), ordered by `order_by` if given."""
    select = ", ".join(f"`{c}`" for c in columns)
    order = f" order by {', '.join(f'`{c}`' for c in order_by)}" if order_by else ""
    return [row.asDict(recursive=True) for row in spark.sql(f"select {select} from silver.`{table}`{order}").collect()]


def history_rows(spark, relation: str, columns: Sequence[str], key: Sequence[str]) -> list[dict]:
    """The versions of a history table (or of a query: `relation` is put after FROM) in
    the oracle's terms (oracle.expected_history): `columns`, start and end as (partition,
    offset) of their records, source times as epoch ms, `_cdc_is_current`."""
    select = ", ".join(f"`{c}`" for c in columns)
    order = ", ".join(f"`{c}`" for c in key)
    rows = spark.sql(f"""
        select {select},
            named_struct('p', cast(split(_cdc_order, '[|]')[4] as int),
                         'o', cast(split(_cdc_order, '[|]')[5] as bigint)) as _cdc_start,
            named_struct('p', cast(split(_cdc_valid_to_order, '[|]')[4] as int),
                         'o', cast(split(_cdc_valid_to_order, '[|]')[5] as bigint)) as _cdc_end,
            unix_millis(_cdc_valid_from) as _cdc_valid_from_ms,
            unix_millis(_cdc_valid_to) as _cdc_valid_to_ms,
            _cdc_is_current
        from {relation}
        order by {order}, _cdc_order""").collect()
    out = []
    for row in rows:
        row = row.asDict(recursive=True)
        row["_cdc_start"] = (row["_cdc_start"]["p"], row["_cdc_start"]["o"])
        row["_cdc_end"] = None if row["_cdc_end"]["p"] is None else (row["_cdc_end"]["p"], row["_cdc_end"]["o"])
        out.append(row)
    return out


# The schemas `dbt build` and the default ingestion write (the project's own names).
PROJECT_SCHEMAS = ("bronze", "silver", "gold", "seeds", "dbt_test__audit")


def _warehouse(spark) -> Path:
    return Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))


# The tables a hard-delete silver model `<model>` consists of: its view and its own tables.
MODEL_TABLE_SUFFIXES = ("", *collect.MODEL_TABLE_SUFFIXES)


def drop_tables(spark, tables: Iterable[tuple[str, str]]) -> None:
    """Drop (schema, table) pairs and their warehouse folders, so a table created again
    under the same name starts empty (Hudi keeps its timeline in the folder). A pair may
    name a view (a hard-delete silver model's relation)."""
    for schema, table in tables:
        if spark.catalog.tableExists(f"{schema}.{table}"):
            if spark.catalog.getTable(f"{schema}.{table}").tableType == "VIEW":
                spark.sql(f"drop view `{schema}`.`{table}`")
            else:
                spark.sql(f"drop table `{schema}`.`{table}` purge")
        shutil.rmtree(table_folder(spark, schema, table), ignore_errors=True)


def drop_schemas(spark, schemas: Iterable[str]) -> None:
    """Drop whole schemas (databases) with their tables and warehouse folders."""
    for schema in schemas:
        spark.sql(f"drop database if exists `{schema}` cascade")
        shutil.rmtree(_warehouse(spark) / f"{schema}.db", ignore_errors=True)
    spark.catalog.clearCache()


@contextmanager
def empty_project_schemas(spark) -> Iterator[None]:
    """The project's schemas empty before the block and after it, whatever ran before: the
    run shares one lakehouse (conftest's fixtures of that name and e2e_lake)."""
    drop_schemas(spark, PROJECT_SCHEMAS)
    try:
        yield
    finally:
        drop_schemas(spark, PROJECT_SCHEMAS)


def table_folder(spark, schema: str, table: str) -> Path:
    """Where a managed table of the embedded lakehouse keeps its files."""
    return _warehouse(spark) / f"{schema}.db" / table


def parquet_column_chunks(spark, folder: Path) -> Iterator[tuple[str, Any]]:
    """(file relative to `folder`, parquet-mr's ColumnChunkMetaData) for every column chunk
    of every parquet file under `folder`, read from the files' footers (through the JVM's
    parquet reader)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    parquet = jvm.org.apache.parquet.hadoop
    for path in sorted(folder.rglob("*.parquet")):
        reader = parquet.ParquetFileReader.open(parquet.util.HadoopInputFile.fromPath(
            jvm.org.apache.hadoop.fs.Path(str(path)), conf))
        try:
            chunks = [column for block in reader.getFooter().getBlocks() for column in block.getColumns()]
        finally:
            reader.close()
        for column in chunks:
            yield str(path.relative_to(folder)), column


def parquet_codecs(spark, folder: Path) -> dict[str, set[str]]:
    """The compression codecs of the column chunks of every parquet file under `folder`, per file."""
    codecs: dict[str, set[str]] = {}
    for file, column in parquet_column_chunks(spark, folder):
        codecs.setdefault(file, set()).add(column.getCodec().toString())
    return codecs


def parquet_encodings(spark, folder: Path) -> dict[str, set[str]]:
    """The encodings of the column chunks of the parquet files under `folder`, per column."""
    encodings: dict[str, set[str]] = {}
    for _, column in parquet_column_chunks(spark, folder):
        encodings.setdefault(column.getPath().toDotString(), set()).update(str(e) for e in column.getEncodings())
    return encodings
