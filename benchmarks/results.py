"""What a benchmark run writes: results.csv, results.md (machine, versions, settings, the
table and the targets), and PNG plots."""

from __future__ import annotations

import csv
import os
import platform
import re
import subprocess
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from benchmarks.cases import (FROM_AVRO, FROM_JSON, INGEST_EXISTING, INGEST_LOCAL1, INGEST_LOCAL1_ONE_CPU,
                              MERGE_LOCAL1, MERGE_LOCAL1_ONE_CPU, PROJECT_DIR, SAME_BATCH, Result, Scale)


def machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal"))
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    pom = (PROJECT_DIR / "jvm" / "pom.xml").read_text()
    from importlib.metadata import version

    return {
        "cpu": f"{cpu} ({os.cpu_count()} cores)",
        "memory": f"{mem_kib / 1024 / 1024:.1f} GiB",
        "os": platform.platform(),
        "java": java,
        "python": platform.python_version(),
        "spark": version("pyspark"),
        "hudi": re.search(r"<hudi.version>([^<]+)", pom).group(1),
        "dbt": f"dbt-core {version('dbt-core')}, dbt-spark {version('dbt-spark')}",
        "JVM class data sharing archive (every step's driver, Hudi's writer too)": _archive(),
    }


def _archive() -> str:
    from core.spark import jvm_archive

    path = jvm_archive()
    return f"{path.name}, {path.stat().st_size / 2**20:.0f} MiB" if path and path.is_file() else "none (not built)"


@dataclass(frozen=True)
class Target:
    what: str
    measured: float | None
    wanted: str
    met: bool | None  # None: not measured in this run


def _one(results: Sequence[Result], case: str, variant_prefix: str, history: int | None = None) -> Result | None:
    found = [r for r in results if r.case == case and r.variant.startswith(variant_prefix)
             and (history is None or r.history_rows == history)]
    return found[0] if found else None


def targets(results: Sequence[Result], master: str) -> list[Target]:
    out: list[Target] = []

    def ratio(what: str, a: float | None, b: float | None, wanted: str, ok) -> None:
        value = a / b if a is not None and b else None
        met = None if value is None or ok is None else ok(value)  # ok=None: reported, not a target
        out.append(Target(what, None if value is None else round(value, 3), wanted, met))

    fresh = [r for r in results if r.case == "ingestion" and r.history_rows == 0]
    ours = next((r for r in fresh if r.variant == f"ours {master}"), None)
    ours1 = next((r for r in fresh if r.variant == INGEST_LOCAL1), None)
    ours1_cpu = next((r for r in fresh if r.variant == INGEST_LOCAL1_ONE_CPU), None)
    ref = next((r for r in fresh if r.variant.startswith("Hudi")), None)
    ratio("ingestion events/s: ours / Hudi's writer", ours and ours.events_per_s, ref and ref.events_per_s,
          ">= 1.0", lambda v: v >= 1.0)
    existing = next((r for r in fresh if r.variant == INGEST_EXISTING.format(master)), None)
    if existing:
        ratio("ingestion events/s: ours into an existing lakehouse (its metastore created before) / Hudi's writer",
              existing.events_per_s, ref and ref.events_per_s, ">= 1.0", lambda v: v >= 1.0)
    kafka = next((r for r in fresh if r.variant == f"ours from Kafka {master}"), None)
    ratio("ingestion events/s, ours: from Kafka / from sink files", kafka and kafka.events_per_s,
          ours and ours.events_per_s, "reported (no target)", None)
    from_avro = next((r for r in fresh if r.variant == FROM_AVRO.format(master)), None)
    from_json = next((r for r in fresh if r.variant == FROM_JSON.format(master)), None)
    if from_avro:  # issue 52: Avro at least as fast as JSON on the same events
        ratio("ingestion events/s, ours on the same events: from Avro / from JSON sink files",
              from_avro.events_per_s, from_json and from_json.events_per_s, ">= 1.0", lambda v: v >= 1.0)
    incremental = sorted((r for r in results if r.case == "refresh" and r.variant == f"ours incremental {master}"),
                         key=lambda r: r.history_rows)
    full = {r.history_rows: r for r in results if r.case == "refresh" and r.variant.startswith("full recompute")}
    if incremental:
        first, last = incremental[0], incremental[-1]
        ratio(f"at {last.history_rows:,} history rows: incremental / full recompute", last.seconds,
              full[last.history_rows].seconds if last.history_rows in full else None, "<= 0.1", lambda v: v <= 0.1)
        if first is not last:  # growth needs two history points (the smoke run has one)
            ratio(f"incremental growth {first.history_rows:,} -> {last.history_rows:,} history rows", last.seconds,
                  first.seconds, "<= 1.5", lambda v: v <= 1.5)
            if first.history_rows in full and last.history_rows in full:
                ratio(f"full recompute growth {first.history_rows:,} -> {last.history_rows:,} (history grew "
                      f"{last.history_rows / first.history_rows:.1f}x)", full[last.history_rows].seconds,
                      full[first.history_rows].seconds, "about linear (reported)", None)
        idle = _one(results, "overhead", "run with no new data")
        ratio(f"no-new-data run ({idle.seconds if idle else '?'} s) / {last.events:,}-change run",
              idle and idle.seconds, last.seconds, "<= 0.5", lambda v: v <= 0.5)
    warm = _one(results, "refresh", "warm process: ours incremental")
    warm_full = _one(results, "refresh", "warm process: full recompute")
    if warm:
        ratio(f"warm process (runner loop), at {warm.history_rows:,} history rows: incremental / full recompute",
              warm.seconds, warm_full and warm_full.seconds, "<= 0.1", lambda v: v <= 0.1)
    ratio(f"ingestion {master} / local[1] events/s", ours and ours.events_per_s, ours1 and ours1.events_per_s,
          ">= 1.6", lambda v: v >= 1.6)
    if ours1_cpu:
        ratio(f"ingestion {master} / {INGEST_LOCAL1_ONE_CPU.removeprefix('ours ')} events/s",
              ours and ours.events_per_s, ours1_cpu.events_per_s, ">= 1.6", lambda v: v >= 1.6)
    fresh_rows = sorted(r.seconds for r in results if r.case == "freshness")
    if fresh_rows:
        median = fresh_rows[len(fresh_rows) // 2]
        out.append(Target(f"freshness, commit -> silver (median of {len(fresh_rows)}; max {fresh_rows[-1]} s)",
                          median, "reported (no target)", None))
    merges = {r.variant: r for r in results if r.case == "refresh"}
    merge2 = merges.get(SAME_BATCH.format(master))
    for variant in (MERGE_LOCAL1, MERGE_LOCAL1_ONE_CPU):
        if merge2 and variant in merges:
            which = variant.removeprefix("ours incremental ")
            ratio(f"merge {master} / {which} events/s (same batch, same silver)", merge2.events_per_s,
                  merges[variant].events_per_s, ">= 1.6", lambda v: v >= 1.6)
    return out


def write(results: Sequence[Result], scale: Scale, master: str, out: Path, notes: str = "") -> list[Target]:
    out.mkdir(parents=True, exist_ok=True)
    rows = [{**asdict(r), "events_per_s": round(r.events_per_s)} for r in results]
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    checks = targets(results, master)
    info = machine()
    lines = [
        f"# Benchmark results ({scale.name} scale)",
        "",
        f"Run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by `python -m benchmarks --scale {scale.name}`; "
        f"Spark master {master}; {scale.keys:,} keys, batches of {scale.batch:,} changes, rows of about "
        f"{scale.row_bytes} bytes of text. Every step is its own process: times include Spark's start, "
        "except the `warm process` rows, measured inside one process after a first pass as the runner loop "
        "(`python -m runner --every N`) runs.",
        "",
        *[f"- {k}: {v}" for k, v in info.items()],
        "",
        "## Targets",
        "",
        "| what | measured | target | met |",
        "|---|---:|---|---|",
        *[f"| {t.what} | {'-' if t.measured is None else t.measured} | {t.wanted} | "
          f"{'-' if t.met is None else ('yes' if t.met else 'NO')} |" for t in checks],
        "",
        "## Steps",
        "",
        "| case | variant | history rows | events | seconds | events/s | peak JVM MiB |",
        "|---|---|---:|---:|---:|---:|---:|",
        *[f"| {r.case} | {r.variant} | {r.history_rows:,} | {r.events:,} | {r.seconds:.1f} | "
          f"{r.events_per_s:,.0f} | {r.peak_jvm_mib:,.0f} |" for r in results],
        "",
    ]
    if notes:
        lines += [notes, ""]
    (out / "results.md").write_text("\n".join(lines))
    plot(results, master, out)
    return checks


def plot(results: Sequence[Result], master: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for variant, style in ((f"ours incremental {master}", "o-"), ("full recompute (reference)", "s--"),
                           (f"warm process: ours incremental {master}", "^"), ("warm process: full recompute", "v")):
        points = sorted((r.history_rows, r.seconds) for r in results if r.case == "refresh" and r.variant == variant)
        if points:
            ax.plot([p[0] / 1e6 for p in points], [p[1] for p in points], style, label=variant)
    ax.set_xlabel("bronze history (million events)")
    ax.set_ylabel("seconds to apply one batch")
    ax.set_title("Silver refresh as history grows")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    # bbox "tight": the saved image grows to its labels instead of cutting them off.
    fig.savefig(out / "refresh_vs_history.png", dpi=110, bbox_inches="tight")
    plt.close(fig)

    fresh = [r for r in results if r.case == "ingestion" and r.history_rows == 0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 6))
    left.barh([r.variant for r in fresh], [r.events_per_s for r in fresh])
    left.set_xlabel("events/s (into an empty table)")
    left.set_title("Ingestion")
    every = [r for r in results if r.peak_jvm_mib]
    right.barh([f"{r.case}: {r.variant} @{r.history_rows:,}" for r in every], [r.peak_jvm_mib for r in every])
    right.set_xlabel("peak JVM resident memory (MiB)")
    right.set_title("Memory")
    right.tick_params(axis="y", labelsize=6)
    fig.tight_layout()
    fig.savefig(out / "ingestion_and_memory.png", dpi=110, bbox_inches="tight")
    plt.close(fig)
