"""What a runner pass builds: the models downstream of the bronze tables that changed
since the last build took them in, the models that are new or changed since then, and
whatever failed or was skipped last time; nothing else (docs/reference/what-a-pass-builds.md).

"Changed" is read from Hudi's timelines, not from the pass's own landing: a bronze table
changed when its newest completed commit is not the one recorded when a build last
built everything downstream of it. So a pass that crashed after landing, another
writer's commits and a failed model are all built again by the next pass, and a table
whose models passed costs nothing more than reading its timeline.

The state lives in one folder (`<lakehouse>/runner-state` by default):
- `state.json`: per bronze table, the commit its models were last built from, and a
  fingerprint of the dbt project's files then;
- `manifest.json`, `run_results.json`: dbt's own artifacts of the last build, for
  `state:modified+` (new or edited models) and `result:error+` and kin (`--state`).
Each file is replaced whole (a temporary file renamed), after the build ends."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from pyspark.sql import SparkSession

from runner import hudi_timeline

log = logging.getLogger(__name__)

STATE_VERSION = 1
STATE_FILE = "state.json"
ARTIFACTS = ("manifest.json", "run_results.json")
# The project's files whose change can change what a build does: dbt sees them too
# (state:modified), but comparing their bytes lets a pass with nothing to do skip dbt.
PROJECT_FILES = ("dbt_project.yml", "selectors.yml", "packages.yml")
# dbt_project.yml's folder settings and dbt's defaults for them
PROJECT_FOLDERS = {"model-paths": ["models"], "macro-paths": ["macros"], "seed-paths": ["seeds"],
                   "snapshot-paths": ["snapshots"], "test-paths": ["tests"], "analysis-paths": ["analyses"]}
# dbt statuses of a node that did not do its job: it and what depends on it run again.
NOT_DONE = ("error", "fail", "skipped", "runtime error")
# The nodes a build runs (a unit test is left out of scheduled passes; exposures and
# the like are not run).
RUN_TYPES = ("model", "test", "seed", "snapshot")


class SelectionError(RuntimeError):
    """The runner's state cannot be read or written; the message names the file."""


@dataclass
class BuildState:
    """What the last build took in: per bronze table, its newest commit when that build
    began (only for tables whose downstream models and tests all passed), and the
    project's fingerprint then."""

    bronze: dict[str, str] = field(default_factory=dict)
    project: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "project": self.project, "bronze": dict(sorted(self.bronze.items()))}


def load_state(directory: Path) -> BuildState | None:
    """The state kept in `directory`, or None when there is none (a first pass)."""
    path = directory / STATE_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"version {data.get('version')!r}, this runner reads {STATE_VERSION}")
        return BuildState(bronze={str(k): str(v) for k, v in data["bronze"].items()}, project=data.get("project"))
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise SelectionError(f"{path} cannot be read ({exc}); remove the folder {directory} to let the next pass "
                             "build every model again") from None


def _replace(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def save_state(directory: Path, state: BuildState, target_dir: Path | None) -> None:
    """`state` and the build's dbt artifacts (from `target_dir`) into `directory`.
    The artifacts go first: a pass killed in between keeps the older state.json, whose
    tables are then built again, which is safe."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ARTIFACTS if target_dir is not None else ():
        source = target_dir / name
        if source.exists():
            partial = directory / (name + ".partial")
            shutil.copyfile(source, partial)
            os.replace(partial, directory / name)
    _replace(directory / STATE_FILE, json.dumps(state.as_dict(), indent=2) + "\n")


def project_folders(project_dir: Path) -> list[str]:
    """The folders dbt reads the project from, as dbt_project.yml names them (a
    `test-paths: []` leaves out `tests/`, which may then be anything else)."""
    import yaml

    project = yaml.safe_load((project_dir / "dbt_project.yml").read_text()) or {}
    return sorted({folder for key, default in PROJECT_FOLDERS.items() for folder in project.get(key, default) or []})


def project_fingerprint(project_dir: Path) -> str:
    """A digest of the dbt project's files (names and bytes) that can change a build."""
    digest = hashlib.sha256()
    paths = [project_dir / name for name in PROJECT_FILES if (project_dir / name).is_file()]
    for folder in project_folders(project_dir):
        if (project_dir / folder).is_dir():
            paths.extend(sorted(p for p in (project_dir / folder).rglob("*") if p.is_file()))
    for path in paths:
        digest.update(str(path.relative_to(project_dir)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def newest_commits(spark: SparkSession, schema: str, tables: set[str] | None = None) -> dict[str, str | None]:
    """Per Hudi table of `schema` (the ingestion's `_`-prefixed bookkeeping tables left
    out): its newest completed data commit, None for a table without one. `tables`: the
    schema's catalog listing, when the caller has it."""
    return {name: timeline.newest_data_commit()
            for name, timeline in hudi_timeline.timelines(spark, schema, tables=tables).items()}


def changed_tables(newest: Mapping[str, str | None], state: BuildState | None) -> set[str]:
    """The bronze tables whose newest commit the last build did not take in (all of
    them without a state)."""
    if state is None:
        return {name for name, commit in newest.items() if commit is not None}
    return {name for name, commit in newest.items() if commit is not None and state.bronze.get(name) != commit}


def bronze_sources(manifest: Mapping[str, Any], schema: str) -> dict[str, str]:
    """Bronze table -> the unique id of the dbt source that reads it, from a manifest."""
    return {node["identifier"]: unique_id for unique_id, node in manifest.get("sources", {}).items()
            if node.get("schema") == schema}


@dataclass(frozen=True)
class MissingSource:
    """A bronze table a dbt source reads that the catalog does not have yet: its
    connector has not landed anything. What reads it is left out of the build."""

    table: str
    topic: str | None  # the source's `meta.topic`: what to land
    source: str  # `<source name>.<table>`, as dbt selects it
    models: tuple[str, ...]  # the models downstream, `<schema>.<name>`

    @property
    def exclude(self) -> str:
        return f"source:{self.source}+"

    def reason(self) -> str:
        land = f"land topic {self.topic}" if self.topic else "land its topic"
        return (f"bronze.{self.table} does not exist yet ({land}): left out of this build: "
                + (", ".join(self.models) or "no model"))


def missing_sources(manifest: Mapping[str, Any], schema: str, existing: set[str]) -> list[MissingSource]:
    """The bronze sources of `manifest` that a model reads and whose table is not in
    `existing`, each with the models downstream of it."""
    nodes = manifest.get("nodes", {})
    missing = []
    for table, unique_id in sorted(bronze_sources(manifest, schema).items()):
        if table in existing:
            continue
        models = sorted(f"{nodes[n]['schema']}.{nodes[n]['alias'] or nodes[n]['name']}"
                        for n in descendants(manifest, unique_id) if n.startswith("model.") and n in nodes)
        if models:
            meta = manifest["sources"][unique_id].get("meta") or {}
            missing.append(MissingSource(table, meta.get("topic"), unique_id.split(".", 2)[2], tuple(models)))
    return missing


def selection_args(changed: Iterable[str], sources: Mapping[str, str], state_dir: Path) -> list[str]:
    """`dbt build` arguments selecting what a pass builds: each changed bronze table's
    source and everything downstream of it, plus, with the last build's artifacts in
    `state_dir`, the new or edited nodes and what failed or was skipped then."""
    selectors = [f"source:{sources[t].split('.', 2)[2]}+" for t in sorted(changed) if t in sources]
    if (state_dir / "manifest.json").exists():
        selectors.append("state:modified+")
    if (state_dir / "run_results.json").exists():
        selectors.extend(["result:error+", "result:fail+", "result:skipped+"])
    if not selectors:
        return []
    return ["--select", *selectors, "--state", str(state_dir)]


def descendants(manifest: Mapping[str, Any], unique_id: str) -> set[str]:
    """Every node downstream of `unique_id` in the manifest's child map."""
    children = manifest.get("child_map", {})
    found, todo = set(), [unique_id]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def settled(changed: Iterable[str], sources: Mapping[str, str], manifest: Mapping[str, Any],
            statuses: Mapping[str, str], left_out: Iterable[str] = ()) -> set[str]:
    """The changed bronze tables a build took in: each one that no dbt source reads, and
    each one whose every downstream node the build ran (`statuses`: unique id -> dbt
    status) without an error, a failure or a skip. Nodes downstream of a source in
    `left_out` (bronze tables not there yet) do not count: their table's arrival
    selects them."""
    waiting = {node for table in left_out if table in sources for node in descendants(manifest, sources[table])}
    done = set()
    for table in changed:
        if table not in sources:
            done.add(table)
            continue
        below = {node for node in descendants(manifest, sources[table])
                 if node.split(".", 1)[0] in RUN_TYPES and node not in waiting}
        if all(node in statuses and statuses[node] not in NOT_DONE for node in below):
            done.add(table)
    return done


def target_dir(dbt_args: list[str], project_dir: Path) -> Path:
    """The folder dbt writes its artifacts to, as dbt finds it: `--target-path`, else
    DBT_TARGET_PATH, else the project's `target-path`, relative to the project."""
    path = None
    for i, arg in enumerate(dbt_args):
        if arg == "--target-path" and i + 1 < len(dbt_args):
            path = dbt_args[i + 1]
        elif arg.startswith("--target-path="):
            path = arg.split("=", 1)[1]
    if path is None:
        path = os.environ.get("DBT_TARGET_PATH")
    if path is None:
        import yaml

        project = yaml.safe_load((project_dir / "dbt_project.yml").read_text()) or {}
        path = project.get("target-path", "target")
    return project_dir / path


def failed_last_time(state_dir: Path) -> bool:
    """Whether the last build's results hold a node that did not do its job."""
    path = state_dir / "run_results.json"
    if not path.exists():
        return False
    try:
        results = json.loads(path.read_text())["results"]
    except (OSError, ValueError, KeyError) as exc:
        raise SelectionError(f"{path} cannot be read ({exc}); remove the folder {state_dir} to let the next pass "
                             "build every model again") from None
    return any(result.get("status") in NOT_DONE for result in results)


def read_manifest(target_dir: Path) -> dict[str, Any]:
    path = target_dir / "manifest.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SelectionError(f"dbt's manifest {path} cannot be read ({exc})") from None


@dataclass
class Plan:
    """What one pass builds, decided after its ingestion."""

    state: BuildState | None  # the last build's, None before the first
    newest: dict[str, str | None]  # bronze table -> newest commit, read before the build
    changed: set[str]  # bronze tables whose newest commit the last build did not take in
    fingerprint: str  # the project's, now
    args: list[str]  # `dbt build` selection arguments; empty: every node
    skip_reason: str | None = None  # set when there is nothing to build
    tables: set[str] = field(default_factory=set)  # the bronze schema's catalog listing, read once a pass

    def as_report(self) -> dict[str, Any]:
        return {"changed_bronze_tables": sorted(self.changed), "first_build": self.state is None,
                "select": self.args, "skipped_because": self.skip_reason}


def plan(spark: SparkSession, schema: str, state_dir: Path, project_dir: Path) -> Plan:
    """The pass's build: nothing when no bronze table changed, the project is as the last
    build left it and that build left nothing undone; every node before a first build;
    else the changed tables' downstream, new or edited nodes, and what was left undone."""
    state = load_state(state_dir)
    tables = hudi_timeline.catalog_tables(spark, schema)
    newest = newest_commits(spark, schema, tables)
    changed = changed_tables(newest, state)
    fingerprint = project_fingerprint(project_dir)
    if state is None or not (state_dir / "manifest.json").exists():
        return Plan(state, newest, changed, fingerprint, [], tables=tables)
    if not changed and fingerprint == state.project and not failed_last_time(state_dir):
        return Plan(state, newest, changed, fingerprint, [], tables=tables,
                    skip_reason="no bronze table changed and the project is as the last build, which passed, left it")
    sources = bronze_sources(json.loads((state_dir / "manifest.json").read_text()), schema)
    return Plan(state, newest, changed, fingerprint, selection_args(changed, sources, state_dir), tables=tables)


def record(build: Plan, schema: str, state_dir: Path, target: Path, statuses: Mapping[str, str],
           left_out: Iterable[str] = ()) -> BuildState:
    """After a build that ran (`statuses`: unique id -> dbt status of each node it ran;
    `left_out`: the bronze tables not there yet, whose models it excluded): the changed
    tables it took in join the state, with the project's fingerprint and the build's
    artifacts from `target`; returns the state saved."""
    manifest = read_manifest(target)
    done = settled(build.changed, bronze_sources(manifest, schema), manifest, statuses, left_out)
    bronze = dict(build.state.bronze) if build.state else {}
    bronze.update({table: build.newest[table] for table in done if build.newest.get(table)})
    state = BuildState(bronze=bronze, project=build.fingerprint)
    save_state(state_dir, state, target)
    left = sorted(build.changed - done)
    if left:
        log.warning("the next pass builds again what reads %s: a model or test downstream failed or was skipped",
                    ", ".join(left))
    return state
