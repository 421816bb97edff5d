"""gold.payment_facts (materialized='hudi_incremental') follows silver payment commit by
commit on real Spark and Hudi. Payment events written here land batch by batch and
silver builds after each; gold builds after most, so that one window spans several
silver commits and the compaction silver runs inline every 5 delta commits. After every
gold build its rows equal the oracle's current state of the files landed so far put
through the model's derivation in Python (positive amounts only, month, weekend, band),
and the build's message counts exactly the silver commits since the one it consumed and
the keys whose silver state changed since: updates, inserts, deletes, a payment updated
to zero (removed from gold), and late events older than what silver holds (which change
nothing, though Hudi's own incremental query returns them). The table rebuilt by
--full-refresh is equal row by row, and a silver commit made while gold builds (by a
pre-hook, which runs after gold fixed its window) is read by the next build.

What an incremental read cannot see makes gold rebuild, saying why in its message and
in dbt's log: the commit gold consumed archived from silver's timeline, a truncate that
silver applies as Hudi deletes, silver's own full refresh, and a change to the model's
SQL. A clean of silver's older file slices does not: gold reads silver as of its newest
commit."""

from __future__ import annotations

import base64
import json
import os
import re
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from ingestion.pipeline import IngestConfig, run as ingest
from tests.support import oracle
from tests.support.lakehouse import MODEL_TABLE_SUFFIXES, dbt_invoke, drop_schemas, drop_tables, project_copy

pytestmark = pytest.mark.integration

SCHEMA = "bronze_gold_incremental"
TOPIC = "pagila.public.payment"
STATE = "silver.payment__cdc_state"
GOLD = "gold.payment_facts"
COLUMNS = ["payment_id", "customer_id", "staff_id", "rental_id", "amount", "payment_date", "payment_month",
           "is_weekend", "amount_band"]
MONDAY = datetime(2022, 5, 2)
WINDOW = re.compile(r"^incremental: (\d+) silver commit\(s\) after (\d+) to (\d+), "
                    r"window (\d+) rows: (\d+) upserted, (\d+) removed$")


def decimal_bytes(cents: int) -> str:
    """A numeric(5,2) as Debezium's precise mode writes it: base64 of the unscaled value."""
    return base64.b64encode(cents.to_bytes((cents.bit_length() + 8) // 8, "big", signed=True)).decode()


def event(op: str, lsn: int, key: int, cents: int = 0, day: int = 0) -> str:
    """One payment change event at source position `lsn` (`t`: a truncate)."""
    image = {"payment_id": key, "customer_id": 100 + key, "staff_id": 1 + key % 2, "rental_id": 1000 + key,
             "amount": decimal_bytes(cents),
             "payment_date": int((MONDAY + timedelta(days=day, hours=key) - datetime(1970, 1, 1)).total_seconds())
             * 1_000_000}
    source = {"connector": "postgresql", "db": "pagila", "schema": "public", "table": "payment", "lsn": lsn,
              "txId": lsn, "ts_ms": 1_700_000_000_000 + lsn, "snapshot": "false"}
    before, after = (image, None) if op == "d" else (None, image)
    if op == "t":
        before = after = None
    return json.dumps({"before": before, "after": after, "source": source, "op": op,
                       "ts_ms": 1_700_000_000_000 + lsn})


def facts(rows: list[dict]) -> list[dict]:
    """The model's derivation, in Python: silver rows -> gold rows."""
    out = []
    for row in rows:
        if row["amount"] <= 0:
            continue
        moment, amount = row["payment_date"], row["amount"]
        out.append({**{c: row[c] for c in COLUMNS[:6]},
                    "payment_month": date(moment.year, moment.month, 1),
                    "is_weekend": moment.weekday() >= 5,
                    "amount_band": "low" if amount < 2 else "medium" if amount < 5 else "high"})
    return out


class Lake:
    """The test's bronze landing, its batches (for the oracle) and dbt on a project copy."""

    def __init__(self, spark, root: Path, table_type: str = "cow"):
        self.spark, self.root, self.table_type = spark, root, table_type
        self.vars = json.dumps({"cdc_bronze_schema": SCHEMA, "cdc_gold_table_type": table_type})
        self.project = project_copy(root)
        self.batches: list[Path] = []
        self.offset = 0
        self.consumed_batches = 0  # batches landed when gold last built

    def land(self, *lines: str) -> None:
        batch = self.root / "batches" / str(len(self.batches))
        for folder in (batch, self.root / "landing"):
            partition = folder / "topics" / TOPIC / "partition=0"
            partition.mkdir(parents=True, exist_ok=True)
            (partition / f"{TOPIC}+0+{self.offset}.json").write_text("\n".join(lines) + "\n")
        self.offset += len(lines)
        self.batches.append(batch)
        summary = ingest(self.spark, IngestConfig(input_uri=str(self.root / "landing" / "topics"),
                                                  bronze_schema=SCHEMA))
        assert summary.quarantined == 0, summary.render()

    def dbt(self, *args: str) -> str:
        result = dbt_invoke(*args, "--vars", self.vars, "--target-path", str(self.project / "target"),
                            project=self.project)
        assert result.success, f"dbt {' '.join(args)}: {result.exception or [r.message for r in result.result]}"
        return result.result.results[0].message if result.result.results else ""

    def silver(self, *lines: str) -> None:
        self.land(*lines)
        self.dbt("run", "--select", "payment")

    def gold(self, *args: str) -> str:
        message = self.dbt("run", "--select", "payment_facts", *args)
        self.consumed_batches = len(self.batches)
        return message

    def state(self, upto: int | None = None) -> dict[int, dict | None]:
        """The oracle's silver state of the batches landed (the first `upto`): every key
        seen, a deleted one as None (whatever older events arrive after its delete)."""
        rows = oracle.expected_current_state_from_batches(self.batches[:upto], "payment", deletes="soft")
        return {row["payment_id"]: None if row["_cdc_is_deleted"] else row for row in rows}

    def expected(self) -> list[dict]:
        return facts(oracle.expected_current_state_from_batches(self.batches, "payment"))

    def changed_since_gold(self) -> tuple[int, int, int]:
        """(keys whose silver state changed since gold last built, of them live with an
        amount over 0, the others): what the next window holds, upserts and removes."""
        before, after = self.state(self.consumed_batches), self.state()
        changed = [key for key in after if key not in before or before[key] != after[key]]
        kept = [k for k in changed if after[k] is not None and after[k]["amount"] > 0]
        return len(changed), len(kept), len(changed) - len(kept)

    def gold_rows(self) -> list[dict]:
        select = ", ".join(COLUMNS)
        return [row.asDict() for row in self.spark.sql(f"select {select} from {GOLD} order by payment_id").collect()]

    def silver_commits(self) -> list:
        """Silver's commits on its active timeline, oldest first."""
        rows = self.spark.sql(f"call show_commits(table => '{STATE}', limit => 1000)").collect()
        return sorted(rows, key=lambda row: row["state_transition_time"])

    def consumed(self) -> str:
        return dict(self.spark.sql(f"show tblproperties {GOLD}").collect())["hudi_incremental.consumed_instant"]

    def incremental_gold(self) -> tuple[int, int, int]:
        """An incremental gold build, checked: it read exactly silver's commits since the
        one it consumed last, its window held exactly the keys whose state changed, and the
        table equals the oracle. Returns the window's (rows, upserted, removed)."""
        want = self.changed_since_gold()
        begin = self.consumed()
        commits = [c["commit_time"] for c in self.silver_commits()]
        message = self.gold()
        match = WINDOW.match(message)
        assert match, message
        assert match.group(2) == begin and match.group(3) == commits[-1], (message, commits)
        assert int(match.group(1)) == len(commits) - commits.index(begin) - 1, (message, commits)
        got = tuple(int(match.group(i)) for i in (4, 5, 6))
        assert got == want, f"window (rows, upserted, removed) {got}, expected {want}: {message}"
        assert self.gold_rows() == self.expected()
        return got


@pytest.fixture
def lake(spark, tmp_path: Path, request):
    yield Lake(spark, tmp_path, getattr(request, "param", "cow"))
    drop_schemas(spark, [SCHEMA])
    drop_tables(spark, [("silver", "payment" + s) for s in (*MODEL_TABLE_SUFFIXES, "__cdc_batch")]
                + [("gold", "payment_facts" + s) for s in ("", "__hudi_window", "__hudi_changes")])


def hudi_incremental_query_keys(spark, begin_completed: str, end_completed: str) -> dict[int, bool]:
    """payment_id -> _cdc_deleted of what Hudi's incremental query returns for silver's
    commits completed in (begin, end]."""
    rows = spark.sql(f"select payment_id, _cdc_deleted from hudi_table_changes('{STATE}', 'latest_state', "
                     f"'{begin_completed}', '{end_completed}')").collect()
    return {row[0]: row[1] for row in rows}


# Gold as merge-on-read (its MERGE appends log files) in `make test`, and as copy-on-write
# (the default) too in `make test-long`: the test ends rebuilding gold as the other type,
# so `make test` still builds and checks a copy-on-write gold, incrementally only as mor.
TABLE_TYPES = os.environ.get("CDC_GOLD_TABLE_TYPES", "mor").split()


@pytest.mark.parametrize("lake", TABLE_TYPES, indirect=True)
def test_gold_takes_only_silver_commits_it_has_not_read(spark, lake: Lake, run_dir: Path):
    # silver and gold built from nothing in one invocation: gold finds the state table
    # silver created moments before (dbt's relation cache knows it)
    lake.land(*(event("c", 10 + k, k, cents, day=k) for k, cents in
                [(1, 499), (2, 99), (3, 250), (4, 700), (5, 150), (6, 575), (7, 0), (8, 325)]))
    result = dbt_invoke("run", "--select", "payment", "payment_facts", "--vars", lake.vars,
                        "--target-path", str(lake.project / "target"), project=lake.project)
    assert result.success, [str(r.message) for r in result.result.results] if result.result else result.exception
    assert {r.node.name: r.message for r in result.result.results}["payment_facts"] == "full refresh"
    lake.consumed_batches = len(lake.batches)
    assert lake.gold_rows() == lake.expected() and len(lake.gold_rows()) == 7
    stored_type = dict(spark.sql(f"show tblproperties {GOLD}").collect())["type"]
    assert stored_type == lake.table_type, stored_type

    # an update, an update to zero (leaves gold), a delete, an insert, an insert deleted again
    lake.silver(event("u", 30, 1, 899, day=1), event("u", 31, 2, 0, day=2), event("d", 32, 3),
                event("c", 33, 9, 1200, day=5), event("c", 34, 10, 300), event("d", 35, 10))
    assert lake.incremental_gold() == (5, 2, 3)

    # late events older than what silver holds: an update of deleted key 3, one of key 1
    # older than its last update; one real update. Hudi's incremental query of the same
    # window returns the late rows (the state table's merge rejects them): gold must not.
    begin = dict(spark.sql(f"show tblproperties {GOLD}").collect())["hudi_incremental.consumed_completion_time"]
    lake.silver(event("u", 20, 3, 111), event("u", 21, 1, 222), event("u", 40, 4, 650, day=3))
    assert lake.incremental_gold() == (1, 1, 0)
    end = dict(spark.sql(f"show tblproperties {GOLD}").collect())["hudi_incremental.consumed_completion_time"]
    assert hudi_incremental_query_keys(spark, begin, end) == {1: False, 3: False, 4: False}

    # three silver builds before the next gold build; silver compacts inline among them
    consumed = lake.consumed()
    lake.silver(event("u", 50, 5, 160), event("d", 51, 6), event("c", 52, 11, 450, day=4))
    lake.silver(event("u", 60, 5, 170), event("u", 61, 2, 199, day=6), event("c", 62, 12, 99))
    lake.silver(event("d", 70, 5), event("c", 71, 6, 1000, day=7), event("u", 72, 12, 0))
    actions = [c["action"] for c in lake.silver_commits() if c["commit_time"] > consumed]
    assert "commit" in actions and actions.count("deltacommit") == 3, actions
    assert lake.incremental_gold() == (5, 3, 2)

    # nothing new in silver: nothing to read
    assert lake.gold() == "no new silver commits"

    # the same model rebuilt from all of silver gives the same table
    incremental = lake.gold_rows()
    assert lake.gold("--full-refresh") == "full refresh"
    assert lake.gold_rows() == incremental == lake.expected()
    # and the model's SQL on its own (`dbt show`) is what the table holds
    shown = dbt_invoke("show", "--select", "payment_facts", "--limit", "-1", "--vars", lake.vars,
                       "--target-path", str(lake.project / "target"), project=lake.project)
    assert sorted(int(row["payment_id"]) for row in shown.result.results[0].agate_table.rows) == \
        [row["payment_id"] for row in incremental]

    # A silver commit made while gold builds: a pre-hook, which runs after gold fixed
    # its window's end, commits to silver as a silver build would, raising payment 1's
    # amount by 1.00 with a newer event order. The next gold build reads it.
    lake.land(event("u", 80, 9, 1300, day=8))
    lake.dbt("run", "--select", "payment")
    columns = [f.name for f in spark.table(STATE).schema if not f.name.startswith("_hoodie_")]
    hook = (f"insert into {STATE} ({', '.join(columns)}) select "
            + ", ".join("amount + 1" if c == "amount" else "concat(_cdc_order, '~')" if c == "_cdc_order" else c
                        for c in columns)
            + f" from {STATE} where payment_id = 1")
    model = lake.project / "models" / "gold" / "payment_facts.sql"
    original = model.read_text()
    model.write_text(original.replace("unique_key='payment_id'", f'unique_key="payment_id", pre_hook="{hook}"'))
    commits = len(lake.silver_commits())
    assert lake.incremental_gold() == (1, 1, 0)  # payment 9 only: the hook's commit came after the window
    assert len(lake.silver_commits()) == commits + 1
    model.write_text(original)
    message = lake.gold()
    assert WINDOW.match(message) and message.endswith("window 1 rows: 1 upserted, 0 removed"), message
    silver = oracle.expected_current_state_from_batches(lake.batches, "payment")
    silver[0]["amount"] += Decimal("1.00")
    assert silver[0]["payment_id"] == 1 and lake.gold_rows() == facts(silver)

    # the other table type: the table is rebuilt as it
    other = {"cow": "mor", "mor": "cow"}[lake.table_type]
    lake.vars = json.dumps({"cdc_bronze_schema": SCHEMA, "cdc_gold_table_type": other})
    assert rebuild_reason(lake.gold(), run_dir) == f"its table type is {lake.table_type}, the model's {other}"
    assert dict(spark.sql(f"show tblproperties {GOLD}").collect())["type"] == other
    assert lake.gold_rows() == facts(silver)


def compact(spark) -> None:
    """Silver's state table compacted now, whatever its every-5-delta-commits trigger says."""
    done = spark.sql(f"call run_compaction(op => 'scheduleAndExecute', table => '{STATE}', "
                     "options => 'hoodie.compact.inline.max.delta.commits=1')").collect()
    assert done, "no compaction ran"


def rebuild_reason(message: str, run_dir: Path) -> str:
    """A gold build's 'full refresh: <reason>', the reason also warned of in dbt's log."""
    assert message.startswith("full refresh: "), message
    reason = message.removeprefix("full refresh: ")
    warning = f"payment_facts: rebuilding {GOLD} from all of silver: {reason}."
    assert warning in (run_dir / "dbt-logs" / "dbt.log").read_text(), warning
    return reason


def test_gold_rebuilds_when_silver_cannot_show_the_window(spark, lake: Lake, run_dir: Path):
    lake.silver(*(event("c", 10 + k, k, 100 * k + 50, day=k) for k in range(1, 7)))
    lake.gold()

    # silver compacted and its older file slices cleaned: gold reads silver as of its
    # newest commit, whose files a clean keeps, so it stays incremental
    lake.silver(event("u", 20, 1, 990))
    compact(spark)
    lake.silver(event("u", 30, 2, 880))
    cleaned = spark.sql(f"call run_clean(table => '{STATE}', retain_commits => 1)").collect()
    assert cleaned and cleaned[0]["total_files_deleted"] > 0, cleaned
    lake.incremental_gold()

    # the commit gold consumed archived: the commits since cannot be listed nor checked
    # (archiving stops at the oldest commit the last clean kept: compact and clean first)
    consumed = lake.consumed()
    lake.silver(event("u", 40, 3, 400))
    compact(spark)
    spark.sql(f"call run_clean(table => '{STATE}', retain_commits => 1)").collect()
    spark.sql(f"call archive_commits(table => '{STATE}', min_commits => 2, max_commits => 3, "
              "retain_commits => 1)").collect()
    assert consumed not in [c["commit_time"] for c in lake.silver_commits()]
    reason = rebuild_reason(lake.gold(), run_dir)
    assert f"silver commit {consumed}, which the table consumed last" in reason and "archived" in reason, reason
    assert lake.gold_rows() == lake.expected()

    # a truncate: silver deletes every row older than it outright (Hudi deletes), which
    # no snapshot shows; a payment after it stays
    lake.silver(event("t", 60, 0), event("c", 61, 7, 450))
    reason = rebuild_reason(lake.gold(), run_dir)
    assert "rows outright" in reason and "truncate or re-snapshot" in reason, reason
    assert lake.gold_rows() == lake.expected() and [r["payment_id"] for r in lake.gold_rows()] == [7]

    # silver rebuilt: a new state table, new instants
    lake.land(event("c", 70, 8, 650))
    lake.dbt("run", "--select", "payment", "--full-refresh")
    reason = rebuild_reason(lake.gold(), run_dir)
    assert "was created anew (a full refresh of silver)" in reason, reason
    assert lake.gold_rows() == lake.expected()

    # the model's SQL changed (here only a comment), with no new silver commit: rows no
    # window touches would keep the old logic
    model = lake.project / "models" / "gold" / "payment_facts.sql"
    model.write_text(model.read_text() + "-- edited\n")
    assert rebuild_reason(lake.gold(), run_dir) == "the model's SQL changed since the table was built"
    assert lake.gold_rows() == lake.expected()

