"""Bronze: one asset per bronze source of the dbt project, all landed by one
`python -m ingestion` process (the project's own entry point, exit codes in its --help)."""

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    AssetsDefinition,
    ConfigurableResource,
    Failure,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)
from dagster_dbt import DagsterDbtTranslator

from core.exit_codes import EXIT_FAILURE, EXIT_LOCKED, EXIT_OK, EXIT_QUARANTINED, EXIT_USAGE

from cdc_lakehouse_dagster.settings import PROJECT_DIR, SPARK_POOL, lakehouse_lock

BRONZE_SOURCE = "bronze"  # the dbt source the ingestion writes (models/silver/_silver__sources.yml)
EXIT_MEANINGS = {EXIT_FAILURE: "failed (nothing after the failing step was written; rerun is safe)",
                 EXIT_USAGE: "usage error", EXIT_LOCKED: "another ingestion is landing into the same bronze schema"}
OUTPUT_TAIL = 60  # lines of the ingestion's output a failure shows


class IngestionResource(ConfigurableResource):
    """One pass of `python -m ingestion`: Kafka Connect S3-sink files (`input`) or Kafka
    topics (`kafka_bootstrap_servers` + `topic_pattern`). Secrets never go here: the
    ingestion reads them from its own environment (CDC_KAFKA_OPT_*, CDC_SCHEMA_REGISTRY_*)."""

    input: str | None = None
    kafka_bootstrap_servers: str | None = None
    topic_pattern: str | None = None
    # the program and its first arguments (empty: this Python's `-m ingestion`), e.g. on a
    # cluster `spark-submit ... tools/spark_submit_module.py ingestion`
    command: list[str] = []
    extra_args: list[str] = []

    @classmethod
    def from_env(cls) -> "IngestionResource":
        """CDC_INPUT, or CDC_KAFKA_BOOTSTRAP_SERVERS and CDC_TOPIC_PATTERN; CDC_INGEST_COMMAND
        and CDC_INGEST_ARGS (shell words) replace the command and add arguments."""
        return cls(
            input=os.environ.get("CDC_INPUT") or None,
            kafka_bootstrap_servers=os.environ.get("CDC_KAFKA_BOOTSTRAP_SERVERS") or None,
            topic_pattern=os.environ.get("CDC_TOPIC_PATTERN") or None,
            command=shlex.split(os.environ.get("CDC_INGEST_COMMAND", "")),
            extra_args=shlex.split(os.environ.get("CDC_INGEST_ARGS", "")),
        )

    def arguments(self, topics: Sequence[str] | None) -> list[str]:
        """The command line; `topics` (sink files only) limits the pass to those topics."""
        if self.input:
            source = ["--input", self.input]
            if topics is not None:
                source += ["--topics", "|".join(re.escape(topic) for topic in sorted(topics))]
        elif self.kafka_bootstrap_servers and self.topic_pattern:
            # the checkpoint belongs to the pattern, so a subset still reads every topic of it
            source = ["--kafka-bootstrap-servers", self.kafka_bootstrap_servers, "--topic-pattern", self.topic_pattern]
        else:
            raise Failure(description="nothing to ingest: set CDC_INPUT (sink files), or "
                                      "CDC_KAFKA_BOOTSTRAP_SERVERS and CDC_TOPIC_PATTERN (Kafka)")
        return [*(self.command or [sys.executable, "-m", "ingestion"]), *source, *self.extra_args]


def bronze_specs(manifest: Mapping[str, Any], translator: DagsterDbtTranslator) -> list[AssetSpec]:
    """An asset per bronze source, under the key dagster-dbt gives the source (so each silver
    model depends on it), with the topic it is landed from."""
    specs = []
    for source in manifest["sources"].values():
        if source["source_name"] != BRONZE_SOURCE:
            continue
        meta = source.get("meta") or source.get("config", {}).get("meta") or {}
        specs.append(AssetSpec(
            key=translator.get_asset_key(source),
            description=source.get("description") or None,
            group_name=BRONZE_SOURCE,
            kinds={"hudi", "spark"},
            metadata={"topic": meta.get("topic"), "primary_key": MetadataValue.json(meta.get("primary_key") or []),
                      "table": source["identifier"]},
            skippable=True,
        ))
    return sorted(specs, key=lambda spec: spec.key.to_user_string())


def parse_summary(output: str) -> dict[str, dict[str, int]]:
    """The ingestion's per-table summary (its table of counts) as numbers per bronze table;
    columns it cannot read as numbers are left out."""
    lines = output.splitlines()
    found: dict[str, dict[str, int]] = {}
    for i, line in enumerate(lines):
        if not (line.startswith("table ") and " landed " in line):
            continue
        columns = re.split(r"\s{2,}", line.strip())
        for row in lines[i + 1:]:
            cells = re.split(r"\s{2,}", row.strip())
            if len(cells) != len(columns):
                break
            found[cells[0]] = {name.replace(" ", "_"): int(cell) for name, cell in zip(columns[1:], cells[1:])
                               if cell.isdigit()}
    return found


def run_ingestion(context: AssetExecutionContext, command: list[str]) -> tuple[int, str]:
    """The ingestion as a process in the project folder, its output copied to the step's log
    as it comes; stopped with the step."""
    context.log.info("running: %s", shlex.join(command))
    proc = subprocess.Popen(command, cwd=PROJECT_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line.rstrip("\n"))
        return proc.wait(), "\n".join(lines)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def build_bronze_assets(manifest: Mapping[str, Any], translator: DagsterDbtTranslator) -> AssetsDefinition:
    specs = bronze_specs(manifest, translator)
    topic_of = {spec.key: str(spec.metadata["topic"]) for spec in specs}
    table_of = {spec.key: str(spec.metadata["table"]) for spec in specs}

    @multi_asset(name="bronze_ingestion", specs=specs, can_subset=True, pool=SPARK_POOL,
                 description="One pass of `python -m ingestion`: new change events into the bronze Hudi tables.")
    def bronze_ingestion(context: AssetExecutionContext, ingestion: IngestionResource) -> Iterator[MaterializeResult[Any]]:
        selected: set[AssetKey] = set(context.selected_asset_keys)
        topics = None if selected == set(topic_of) else [topic_of[key] for key in selected]
        command = ingestion.arguments(topics)
        with lakehouse_lock():
            code, output = run_ingestion(context, command)
        if code not in (EXIT_OK, EXIT_QUARANTINED):
            tail = "\n".join(output.splitlines()[-OUTPUT_TAIL:])
            raise Failure(description=f"the ingestion exited {code}: {EXIT_MEANINGS.get(code, 'failed')}",
                          metadata={"exit_code": code, "output": MetadataValue.md(f"```\n{tail}\n```")})
        counts = parse_summary(output)
        if code == EXIT_QUARANTINED:
            context.log.warning("the ingestion quarantined records: see bronze._quarantine for each one's reason")
        for key in sorted(selected, key=lambda k: k.to_user_string()):
            table = counts.get(table_of[key], {})
            yield MaterializeResult(asset_key=key, metadata={
                "exit_code": code,
                "events_read": table.get("events_read", 0),
                "landed": table.get("landed", 0),
                "quarantined": table.get("quarantined", 0),
            })

    return bronze_ingestion
