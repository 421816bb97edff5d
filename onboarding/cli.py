"""Command line: `python -m onboarding`: scaffold silver models for the topics matching a pattern."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from core.cli import run_command
from core.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from core.identifiers import TableNameError
from ingestion.errors import IngestionError
from onboarding import drift, scaffold
from onboarding.errors import OnboardingError, OnboardingUsageError
from onboarding.schemas import TopicSample, TopicSchema, bronze_images, topic_schema
from onboarding.types import Column

log = logging.getLogger("onboarding")

PROJECT_DIR = Path(__file__).resolve().parent.parent
REGISTRY_URL_ENV = "CDC_SCHEMA_REGISTRY_URL"

EPILOG = f"""\
one source of schemas per run:
  --input DIR_OR_URI           the S3 sink's topics/ folder: each partition's oldest and newest files
                               (JSON with the converter's schema wrapper, Avro, Parquet; keys from
                               <name>.keys.json / .keys.avro / .keys.parquet)
  --kafka-bootstrap-servers H:P  each partition's newest records (consumer settings from
                               CDC_KAFKA_OPT_<NAME> environment variables, as the ingestion reads them)
  --schema-registry-url URL    the latest <topic>-value and <topic>-key subjects (or ${REGISTRY_URL_ENV};
                               credentials from CDC_SCHEMA_REGISTRY_USER / CDC_SCHEMA_REGISTRY_PASSWORD)

what it writes, for each matching topic, only where missing (nothing that exists is changed):
  models/silver/_silver__sources.yml  source bronze: name, description, meta.topic, meta.primary_key
  models/silver/<table>.sql           the model (as models/silver/actor.sql), <table> = the topic's last part
  models/silver/_silver__models.yml   its columns with data_type, descriptions and tests
  A model that exists is compared with upstream instead: the drift report lists each difference.
  Records without a schema take their columns from bronze.<topic table> (land them first).

exit codes:
  {EXIT_OK}  ok (drift is reported, not a failure)
  {EXIT_USAGE}  usage error (bad arguments)
  {EXIT_FAILURE}  failure: a topic could not be read or scaffolded (the others were)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m onboarding",
        description="Write the bronze source entry, silver model and typed model YAML of every Debezium topic "
        "matching a pattern; report how existing models differ from their upstream schema.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--input", metavar="DIR_OR_URI", help="the S3 sink's topics/ folder (local path or Hadoop URI)")
    source.add_argument("--kafka-bootstrap-servers", metavar="HOST:PORT[,...]", help="read the topics from Kafka")
    source.add_argument("--schema-registry-url", metavar="URL",
                        help=f"read the schemas from a Confluent-compatible registry (default: ${REGISTRY_URL_ENV})")
    parser.add_argument("--topic-pattern", metavar="REGEX", required=True,
                        help=r"topics to onboard, a regex the whole name must match, e.g. 'pagila\.public\..*'")
    parser.add_argument("--project-dir", type=Path, default=PROJECT_DIR, metavar="DIR",
                        help=f"the dbt project to write into (default: {PROJECT_DIR})")
    parser.add_argument("--dry-run", action="store_true", help="print what would be written and the drift; write nothing")
    parser.add_argument("--bronze-schema", default="bronze", help="where landed topics are (default: bronze)")
    parser.add_argument("--target", default="local", choices=["local", "none"],
                        help="`local`: the embedded Spark of profiles/profiles.yml (default); `none`: spark-submit's")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


@dataclass
class Outcome:
    """What the run did for one topic, for the report."""

    topic: str
    written: scaffold.Written | None = None
    not_inferred: list[Column] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    origin: str = ""


def main(argv: Sequence[str] | None = None, spark: Any = None) -> int:
    """Run the command; `spark` is a session to use instead of starting one (tests)."""
    return run_command(build_parser(), argv, lambda args: _run(args, spark),
                       {OnboardingUsageError: EXIT_USAGE, OnboardingError: EXIT_FAILURE, IngestionError: EXIT_FAILURE},
                       "onboarding")


def _run(args: argparse.Namespace, spark: Any) -> int:
    read = make_reader(args)
    session = spark
    if session is None and (args.input or args.kafka_bootstrap_servers):
        session = _session(args.target)
    samples = read(session)
    outcomes = onboard(samples, args.project_dir, args.dry_run, session, args.bronze_schema)
    print(render(outcomes, args.dry_run))
    return EXIT_FAILURE if any(o.error for o in outcomes) else EXIT_OK


def _session(target: str) -> Any:
    from core.spark import get_session

    return get_session(None if target == "none" else target)


def make_reader(args: argparse.Namespace) -> Callable[[Any], dict[str, TopicSample]]:
    """The schema reader the arguments ask for, checked before Spark starts."""
    from onboarding import schemas

    try:
        re.compile(args.topic_pattern)
    except re.error as exc:
        raise OnboardingUsageError(f"--topic-pattern {args.topic_pattern!r} is not a valid regular expression: {exc}")
    if not args.project_dir.is_dir() or not (args.project_dir / "dbt_project.yml").exists():
        raise OnboardingUsageError(f"--project-dir {args.project_dir} is not a dbt project (no dbt_project.yml)")
    if args.input:
        return lambda spark: schemas.read_sink(spark, args.input, args.topic_pattern)
    if args.kafka_bootstrap_servers:
        if not args.kafka_bootstrap_servers.strip():
            raise OnboardingUsageError("--kafka-bootstrap-servers is empty: give host:port[,host:port...]")
        return lambda spark: schemas.read_kafka(spark, args.kafka_bootstrap_servers, args.topic_pattern)
    url = args.schema_registry_url or os.environ.get(REGISTRY_URL_ENV, "").strip()
    if not url:
        raise OnboardingUsageError(f"give one of --input, --kafka-bootstrap-servers or --schema-registry-url "
                                   f"(or set {REGISTRY_URL_ENV})")
    from ingestion.errors import UsageError
    from ingestion.registry import PASSWORD_ENV, USER_ENV, SchemaRegistryClient

    try:
        client = SchemaRegistryClient(url, os.environ.get(USER_ENV) or None, os.environ.get(PASSWORD_ENV) or None)
    except UsageError as exc:
        raise OnboardingUsageError(str(exc)) from None
    return lambda _: schemas.read_registry(client, args.topic_pattern)


def onboard(samples: dict[str, TopicSample], project_dir: Path, dry_run: bool, spark: Any = None,
            bronze_schema: str = "bronze") -> list[Outcome]:
    """Plan, scaffold and compare every sampled topic; a topic that cannot be planned is
    reported with its error and the others go on."""
    if not samples:
        raise OnboardingError("no topic matches --topic-pattern")
    project = scaffold.Project.read(project_dir)
    outcomes: list[Outcome] = []
    plans: list[scaffold.TablePlan] = []
    schemas: dict[str, TopicSchema] = {}
    for topic, sample in sorted(samples.items()):
        outcome = Outcome(topic, origin=sample.origin)
        outcomes.append(outcome)
        try:
            bronze = None
            if not sample.value_schemas and spark is not None:
                from ingestion.naming import table_for_topic

                bronze = bronze_images(spark, bronze_schema, table_for_topic(topic))
            schema = topic_schema(sample, bronze)
            outcome.origin, outcome.notes = schema.origin, list(schema.problems)
            key = schema.key
            if not key and (existing := project.sources.get(project.source_topics.get(topic, ""))):
                key = list((existing.get("meta") or {}).get("primary_key") or [])
            if not schema.columns:
                raise OnboardingError(f"topic {topic!r}: no columns: {'; '.join(schema.problems) or 'nothing read'}")
            table_plan = scaffold.plan(topic, key, schema.columns)
        except (OnboardingError, IngestionError, TableNameError) as exc:
            outcome.error = str(exc)
            continue
        schemas[topic] = schema
        plans.append(table_plan)
        outcome.not_inferred = [c for c in schema.columns if not c.inferred]
    clashes = {p.model for p in plans if sum(q.model == p.model for q in plans) > 1}
    for outcome in outcomes:
        if outcome.topic in schemas and any(p.model in clashes for p in plans if p.topic == outcome.topic):
            outcome.error = ("another matching topic ends in the same table name; onboard them one at a time "
                             "(a narrower --topic-pattern) and name one model by hand")
    plans = [p for p in plans if p.model not in clashes]
    for written in scaffold.scaffold(project, plans, dry_run):
        outcome = next(o for o in outcomes if o.topic == written.plan.topic)
        outcome.written = written
        p = written.plan
        if p.model in project.model_entries:
            read = project.model_source(p.model)
            if read is not None and read != p.source_name:
                outcome.notes.append(f"model {p.model} reads source {read}, not {p.source_name}: not compared")
            else:
                outcome.drift = drift.differences(project.model_entries[p.model][1], p.columns)
    return outcomes


def render(outcomes: list[Outcome], dry_run: bool) -> str:
    """The run's report: per topic what was added or kept, what was not inferred, the drift."""
    lines = []
    verb = "would add" if dry_run else "added"
    for o in outcomes:
        lines.append(f"{o.topic}  ({o.origin})")
        if o.error:
            lines.append(f"  FAILED: {o.error}")
        if o.written:
            w, p = o.written, o.written.plan
            lines.append(f"  source bronze.{p.source_name}: {verb if w.source == 'added' else w.source}")
            lines.append(f"  model models/silver/{p.model}.sql: {verb if w.model_file == 'added' else w.model_file}")
            lines.append(f"  YAML entry {p.model}: {verb if w.model_entry == 'added' else w.model_entry}")
            if dry_run:
                for part, text in w.texts.items():
                    lines.append(f"  --- {part} ---")
                    lines += [f"  | {ln}" for ln in text.rstrip("\n").splitlines()]
        for column in o.not_inferred:
            lines.append(f"  not inferred: {column.name} ({column.upstream}): declared {column.data_type}; {column.note}")
        lines += [f"  note: {n}" for n in o.notes]
        if o.drift:
            lines.append(f"  drift ({len(o.drift)}):")
            lines += [f"    {d}" for d in o.drift]
    failed = sum(1 for o in outcomes if o.error)
    drifted = sum(1 for o in outcomes if o.drift)
    lines.append(f"{len(outcomes)} topic(s), {failed} failed, {drifted} with drift")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
