"""Build the Spark driver's class data sharing (CDS) archive: `make setup` runs it.

    python -m tools.jvm_archive --out .jars/spark-driver.jsa

Every process of the project (an ingestion run, a `dbt build`, a test's session) starts
a JVM that loads and verifies the same tens of thousands of classes (Spark, Hive's
metastore client, DataNucleus, Derby, Hudi) before it does any work. Java's CDS maps
classes a training run loaded from an archive instead: this runs the project's own work
once on a tiny generated stream (an ingestion, the silver model's first and incremental
builds, the full recompute, a landing from Avro sink files) with
`-XX:ArchiveClassesAtExit`, and the `local` profile
starts every driver with `-XX:SharedArchiveFile` pointing at the result, so that the
classes are mapped instead of loaded and verified again (docs/decisions/jvm-class-data-sharing.md).
A JVM that cannot use the archive (another Java build, other jars) says so
in one warning line and starts as it would without it; `make setup` rebuilds it when the
jars or the Python packages change.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from core.spark import PROJECT_DIR, get_session, jvm_archive, profile_spark_settings

EXTRA_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
SHARED_ARCHIVE_OPTION = re.compile(r"\s*-XX:SharedArchiveFile=\S*")


class ArchiveError(RuntimeError):
    """The training run did not leave an archive; the message says what happened."""


def training_java_options(profile_options: str, archive: Path) -> str:
    """The profile's driver options without its SharedArchiveFile (the archive is being
    made), with the option that writes `archive` when the JVM exits."""
    # -Xlog:cds=error: the JVM names each class it leaves out of the archive (old class
    # files, signed jars) at warning level, thousands of lines that need no action
    return (f"{SHARED_ARCHIVE_OPTION.sub('', profile_options).strip()} -XX:ArchiveClassesAtExit={archive} "
            "-Xlog:cds=error")


def _workload(spark: SparkSession, work: Path) -> None:
    """The project's own work, small: what the driver loads for it is what gets archived."""
    from benchmarks.avro_sink import convert
    from benchmarks.cases import SOURCES_YML
    from benchmarks.generator.sink import Layout, write_segments
    from benchmarks.generator.stream import StreamConfig
    from benchmarks.warm_loop import timed_dbt  # raises if the run fails
    from ingestion.pipeline import IngestConfig, run as ingest

    streams = work / "streams"
    write_segments(StreamConfig(events=3000, keys=500), Layout(records_per_file=500),
                   [("first", 2000), ("second", 1000)], streams)
    for segment, selects in (("first", ["orders", "orders_full_recompute"]), ("second", ["orders"])):
        ingest(spark, IngestConfig(input_uri=str(streams / segment / "topics"), sources_yml=SOURCES_YML))
        for select in selects:
            timed_dbt(select)
    # The S3 sink's Avro files take a read path of their own (Spark's Avro source and the
    # container header): landed once, its classes are archived too (docs/decisions/avro-sink-files.md).
    wrapped = work / "wrapped"
    write_segments(StreamConfig(events=1000, keys=500), Layout(shape="flattened", wrapped=True, records_per_file=500),
                   [("all", 1000)], wrapped)
    convert(wrapped / "all" / "topics", work / "avro" / "topics", codec="null")
    ingest(spark, IngestConfig(input_uri=str(work / "avro" / "topics"), bronze_schema="bronze_avro",
                               sources_yml=SOURCES_YML))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.jvm_archive", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=jvm_archive(), help="the archive to write (default: the profile's)")
    args = ap.parse_args(argv)
    out: Path = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)

    with tempfile.TemporaryDirectory(prefix="cdc-jvm-archive-") as tmp:
        work = Path(tmp)
        # A lakehouse and dbt folders of its own: the training run touches nothing of the user's.
        os.environ.update({"CDC_LAKEHOUSE_DIR": str(work / "lakehouse"), "DBT_TARGET_PATH": str(work / "target"),
                           "DBT_LOG_PATH": str(work / "logs")})
        os.environ.setdefault("DBT_PROFILES_DIR", str(PROJECT_DIR / "profiles"))
        options = training_java_options(profile_spark_settings("local")[EXTRA_JAVA_OPTIONS], partial)
        spark = get_session("local", {EXTRA_JAVA_OPTIONS: options})
        gateway = spark.sparkContext._gateway  # type: ignore[attr-defined]
        _workload(spark, work)
        spark.stop()
        # The JVM writes the archive when it exits: end it, then wait for it to finish.
        # The call never answers (the JVM is gone): py4j's traceback for that says nothing.
        logging.disable(logging.CRITICAL)
        try:
            gateway.jvm.java.lang.System.exit(0)
        except Exception:  # noqa: BLE001 - expected, see above
            pass
        finally:
            logging.disable(logging.NOTSET)
        gateway.proc.wait(timeout=300)
    if not partial.is_file() or partial.stat().st_size == 0:
        raise ArchiveError(f"the training JVM exited without writing {partial} (run with its output to see why)")
    partial.replace(out)
    print(f"wrote {out} ({out.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
