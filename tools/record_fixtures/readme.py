"""The fixture folder's README.md: how and when the records were made, the workload,
and what the real output looks like (observed with the versions it names)."""

from __future__ import annotations

from pathlib import Path

from . import workload
from .recorder import CONNECTORS, Recording

COMMAND = "python -m tools.record_fixtures --out tests/fixtures/debezium"

OBSERVED = """\
## What the real output looks like

Observed in these records (JsonConverter; `E` = envelope topics, `F` = flattened topics;
in `E` for PostgreSQL every key and value is `{"schema": ..., "payload": ...}`).

| PostgreSQL type (column) | encoding, both shapes |
| --- | --- |
| `numeric(p,s)` (`film.rental_rate`, `payment.amount`) | base64 big-endian two's-complement unscaled integer, minimal length: `2.99` → `"ASs="`, `1.99` → `"AMc="` (leading zero byte keeps it positive), `-0.50` → `"zg=="`, `123.45` → `"MDk="`. The scale is only in `E`'s schema (`org.apache.kafka.connect.data.Decimal`, `parameters.scale`); `F` has no schema, so the reader must know it |
| `date` (`customer.create_date`) | int days since 1970-01-01: `1906-12-09` → `-23034` (`io.debezium.time.Date`) |
| `timestamp` (`last_update`, `payment.payment_date`) | int microseconds since the epoch, wall-clock as UTC: `2024-05-01 10:00:00.123456` → `1714557600123456` (`io.debezium.time.MicroTimestamp`) |
| `timestamptz` (`rental.checked_at`, added by ALTER) | ISO-8601 string in UTC with always 6 fraction digits and `Z`: `2024-05-02 03:04:05.123456+02` → `"2024-05-02T01:04:05.123456Z"`, `2024-06-01 08:00:00+00` → `"2024-06-01T08:00:00.000000Z"` (`io.debezium.time.ZonedTimestamp`) |
| `tsrange` (`rental.rental_period`) | PostgreSQL's text form, bounds double-quoted: `"[\\"2024-05-01 10:00:00.5\\",)"`, `"[\\"2024-05-01 10:00:00.5\\",\\"2024-05-03 09:30:00\\"]"` (plain `string`, no semantic type name) |
| `tstzrange` (`rental.return_window`, added by ALTER) | text form in the server's `TimeZone` ({pg_timezone} here), offset as `+00`: `"[\\"2024-05-01 00:00:00+00\\",\\"2024-05-08 00:00:00+00\\")"`, `"[\\"2024-06-01 08:00:00+00\\",)"`, `"empty"` |
| `bytea` (`staff.picture`) | base64: `\\x00ff10` → `"AP8Q"` |
| `text[]` (`film.special_features`) | JSON array of strings |
| enum `mpaa_rating`, domain `year`, `boolean`, `tsvector` | `"PG-13"` (`io.debezium.data.Enum`), int, JSON boolean, `"'film':5 'fixtur':1,9 'odyssey':2 ..."` (`io.debezium.data.Tsvector`) |
| `character(20)` (`language.name`) | padded: `"Esperanto           "` |
| unchanged TOASTed value | `"__debezium_unavailable_value"` (text), `["__debezium_unavailable_value"]` (text[]), `"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="` (bytea: base64 of the same text); only in updates that did not set the column. `film.fulltext` is recomputed by Pagila's trigger on every update, so it is never a placeholder |

- **Deletes (PostgreSQL, REPLICA IDENTITY DEFAULT).** `E`: `before` holds the real key;
  every other column is *not* the old value but the column's default if it has a
  constant one (the field's `default` in `E`'s schema: `rental_duration: 3`, `rental_rate: "AfM="` = 4.99, `replacement_cost:
  "B88="` = 19.99, `rating: "G"`), else the type's zero for NOT NULL columns (`""`, `0`,
  `"AA=="` for numeric, `""` for a NOT NULL `tsrange`, `0` for `last_update`, whose default
  `now()` is not constant), else null. `after` is null; a tombstone (value null, same key)
  follows at the next offset. `F`: one record with the same row fields as `E`'s `before`
  plus `"__deleted": "true"`, `"__op": "d"`; no tombstone (`rewrite` drops it).
- **Deletes (MariaDB)**: `before` is the full old row (binlog_row_image=FULL), in both shapes.
- **Primary-key change.** PostgreSQL (`update rental set rental_id = 95004 where rental_id =
  95003`): `E` has `d` (key 95003, `before` as for any delete), a tombstone for 95003, then
  `c` (key 95004, the full new row); `d` and `c` carry the *same* `source.lsn` and
  `sequence` (one WAL record). `F` has the `__deleted: "true"` record for 95003, then a
  `__op: "c"` record for 95004, same `__lsn`. MariaDB: the same three records (`E`) or two
  (`F`), with the same `file`, `pos` and `row`; the `d`'s `before` is the full old row.
- **Moving a payment to another partition** (updating `payment_date` across partition
  bounds) arrives as `d` + tombstone + `c` of the *same* key, with two different LSNs
  (PostgreSQL logs a delete and an insert), not as an update.
- **Updates** in PostgreSQL have `before: null`; MariaDB updates have the full `before`.
- **Generated columns** `customer.active` and `film.revenue_projection` are absent from
  every streamed record.
- **Added columns** (`ALTER TABLE ... ADD COLUMN`) appear in records of changes committed
  after the ALTER (null when not set), not in earlier ones, in both shapes and databases.
- **Ordering fields.** PostgreSQL: `source.lsn` (`E`) / `__lsn` (`F`) grows with every
  change; `source.sequence` is a string holding a JSON array of two LSN strings, the
  second equal to `lsn`, the first the same for every change of one transaction;
  `source.txId` is shared by the changes of one transaction; `F` carries no `txId`. MariaDB:
  `source.pos` (`E`) / `__pos` (`F`) is the position of the binlog event, so it differs
  between the statements of one transaction; `row` numbers the rows of one event (a
  3-row INSERT has rows 0, 1, 2 at one `pos`); `source.ts_ms` has whole seconds. The
  snapshot records (`op: "r"`) all share one `file`/`pos`/`row` (the binlog position the
  snapshot started at) and mark `source.snapshot` as `"first"`, `"true"`, ..., `"last"`;
  `F` has no snapshot field (not in `add.fields`). MariaDB's `gtid` (`"0-1-8"`) is the
  transaction id.
"""


def _kb(path: Path) -> str:
    return f"{path.stat().st_size / 1024:.1f} kB"


def render(recording: Recording) -> str:
    out = recording.out
    v = recording.versions
    lines = [
        "# Debezium fixtures: real connector output",
        "",
        "Real records of the project's four connectors (`stack/connectors/*.json`) for a small",
        "scripted workload, recorded by the project's own stack. Fast unit tests",
        "(`tests/unit/test_debezium_fixtures.py`) feed them through the ingestion transform instead",
        "of hand-written Debezium records. Do not edit them by hand: record them again.",
        "",
        "```",
        COMMAND + "      # or: make fixtures",
        "```",
        "",
        "The recorder (`tools/record_fixtures/`) starts the stack in its own folder and ports",
        "(`/tmp/fixture-stack`, PostgreSQL 55452, MariaDB 53326, Kafka 59112/59113, Connect 58103;",
        "`--help` for options), registers the four connectors, runs the workload, waits until",
        "Debezium caught up (`stack.wait_caught_up`), reads every record of the data topics with",
        "one Spark batch query, writes",
        "this folder and stops and deletes that stack.",
        "",
        "**No Pagila data.** Pagila's license forbids copying its dataset into the repo, so the two",
        "PostgreSQL connectors are registered with `snapshot.mode=no_data` (Debezium 3.5: schema",
        "only, then streaming): the records hold only rows the workload created, with ids >= 95000",
        "and values invented for it. Pagila ids appear only as foreign-key values (store 1, staff 1,",
        "language 1, city 1, country 1, address 1, customer 1, film 1). The MariaDB connectors keep",
        "their `initial` snapshot: `movies_db.movies` holds six rows written for this project",
        "(`stack/mariadb.py`), recorded as `op: \"r\"`.",
        "",
        "## Recording",
        "",
        "| | |",
        "| --- | --- |",
        f"| recorded on | {recording.recorded_at} |",
        f"| Debezium | {v['debezium']} (PostgreSQL connector with `pgoutput`, MariaDB connector) |",
        f"| Kafka / Kafka Connect | {v['kafka']} |",
        f"| PostgreSQL | {v['postgresql']} (`TimeZone` = {recording.pg_timezone}) |",
        f"| MariaDB | {v['mariadb']} |",
        f"| took | {recording.seconds['total']:.0f} s on 2 busy cores: "
        + "; ".join(f"{k} {s:.0f} s" for k, s in recording.seconds.items() if k != "total") + " |",
        "",
        "## Files",
        "",
        "`<connector>/<topic>.jsonl`: one Kafka record per line, in offset order:",
        '`{"topic", "partition", "offset", "key", "value"}`, where `key` and `value` are the exact',
        "text Kafka held (`value` is null for a tombstone). Every topic has one partition. Kafka",
        "headers and the heartbeat topics (`__debezium-heartbeat.*`) are not recorded.",
        "",
        "| connector | shape | file | records | size |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for name, count in sorted(recording.counts.items()):
        connector = name.split("/", 1)[0]
        shape = CONNECTORS[connector]["shape"]
        lines.append(f"| {connector} | {shape} | `{name}` | {count} | {_kb(out / name)} |")
    total = sum((out / n).stat().st_size for n in recording.counts)
    lines += [
        f"| | | total | {sum(recording.counts.values())} | {total / 1024:.1f} kB |",
        "",
        "`workload.json`: the connectors, primary keys, and every statement in commit order with",
        "the row changes it makes (`op`, `key`, the columns it `set`s, typed values): tests derive",
        "their expectations from it, never from the records. It is written from",
        "`tools/record_fixtures/workload.py`.",
        "",
        "## The workload",
        "",
        "PostgreSQL (database `pagila`, one transaction per item, in this order):",
        "",
    ]
    for i, (label, statements) in enumerate(workload.POSTGRES, 1):
        lines.append(f"{i}. {label}:")
        lines += [f"   - `{_short(s.sql)}`" for s in statements]
    lines += ["", "MariaDB (`movies_db.movies`), after the snapshot of its six seeded rows:", ""]
    for i, (label, statements) in enumerate(workload.MARIADB, 1):
        lines.append(f"{i}. {label}:")
        lines += [f"   - `{_short(s.sql)}`" for s in statements]
    lines += [
        "",
        "Why no key change on `actor`: Pagila's foreign keys from `film_actor.actor_id` (and",
        "the other `smallint` references) are `ON UPDATE CASCADE`, and the cascade casts the new",
        "key to `smallint` even when no row references it, so a key >= 95000 fails there. For",
        "the same reason rows with ids >= 95000 cannot be referenced through `smallint` columns",
        "(`film_actor`, `film_category` are not touched).",
        "",
        OBSERVED.replace("{pg_timezone}", recording.pg_timezone),
    ]
    return "\n".join(lines)


def _short(sql: str) -> str:
    """The statement (one line already), big-value subqueries named instead of spelled out."""
    text = sql
    for big in (workload.BIG_TEXT, workload.BIG_ARRAY, workload.BIG_BYTES):
        text = text.replace(big.sql(), f"<big {big.kind}: {big.n} md5 strings>")
    return text


def write_readme(recording: Recording) -> None:
    (recording.out / "README.md").write_text(render(recording))
