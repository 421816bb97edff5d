"""The scripted workload: a snapshot (batch 1) and two batches of streaming changes.

Every event is a dict {table, op, before, after, lsn, last_commit_lsn, txId,
source_ts_us, ts_us, snapshot}; rows are dicts of typed Python values. The workload
also keeps `state`, its own model of the source tables after every committed change
(the late event is not applied: it is older than what the table already holds).
Delete events keep the full old row here; the encoder sends what REPLICA IDENTITY
DEFAULT gives (the old key, other columns defaults/zeros/null); updates carry
before=null (key unchanged). `country` is REPLICA IDENTITY
NOTHING in Pagila, so it only ever gets inserts (PostgreSQL refuses UPDATE/DELETE on
a published table without a replica identity). An update may list `unavailable`
columns: unchanged TOASTed values, which Debezium replaces by its placeholder (the
event's row keeps the real value, as the table does). Generated columns are computed
on every change, as PostgreSQL does.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from decimal import Decimal

from . import pagila

SNAPSHOT_TIME = datetime(2024, 6, 3, 8, 0, 0)
BATCH_START = {2: datetime(2024, 6, 3, 8, 20, 0), 3: datetime(2024, 6, 3, 9, 40, 0)}


def _us(dt: datetime) -> int:
    d = dt - datetime(1970, 1, 1)
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


class Workload:
    def __init__(self, schema: dict, rows: dict[str, list[dict]], seed: int):
        self.schema = schema
        self.rng = random.Random(seed)
        self.state = {t: {self.key(t, r): dict(r) for r in rows[t]} for t in pagila.TABLES}
        self.batches: dict[int, list[dict]] = {1: [], 2: [], 3: []}
        self.special: list[dict] = []
        self.lsn = 0x2A40000 + self.rng.randrange(0, 0x10000) * 8
        self.last_commit_lsn = self.lsn
        self.txid = 1200 + self.rng.randrange(0, 300)
        self._tx = None
        self.altered: set[str] = set()  # tables that got their ADDED_LATER columns

    def columns(self, table: str) -> list[str]:
        """The table's columns now (with those added by ALTER TABLE, once it ran)."""
        added = list(self.schema[table]["added_later"]) if table in self.altered else []
        return list(self.schema[table]["columns"]) + added

    def alter_add_columns(self, table: str):
        """ALTER TABLE ... ADD COLUMN (no default): existing rows get NULL; only later
        events carry the columns. DDL is not a change event."""
        self.altered.add(table)
        for row in self.state[table].values():
            for column in self.schema[table]["added_later"]:
                row.setdefault(column, None)

    def key(self, table: str, row: dict) -> tuple:
        return tuple(row[c] for c in self.schema[table]["primary_key"])

    def keydict(self, table: str, key: tuple) -> dict:
        return dict(zip(self.schema[table]["primary_key"], key))

    def note(self, case: str, table: str, key: tuple, batches: list[int], detail: str = ""):
        self.special.append({"case": case, "table": table, "key": self.keydict(table, key),
                             "batches": batches, "detail": detail})

    # --- snapshot -----------------------------------------------------------------
    def snapshot(self):
        self.txid += 1
        lsn = self.lsn
        src_us = _us(SNAPSHOT_TIME)
        events = []
        for table in pagila.TABLES:
            for row in sorted(self.state[table].values(), key=lambda r: self.key(table, r)):
                events.append({"table": table, "op": "r", "before": None, "after": dict(row),
                               "lsn": lsn, "last_commit_lsn": lsn, "txId": self.txid,
                               "source_ts_us": src_us, "snapshot": "true"})
        for i, ev in enumerate(events):
            ev["ts_us"] = src_us + 350_000 + i * 180  # processing time, monotonic
        events[0]["snapshot"] = "first"
        events[-1]["snapshot"] = "last"
        self.batches[1] = events
        self.clock = SNAPSHOT_TIME
        self.lsn += 0x1000

    # --- streaming transactions -----------------------------------------------------
    def begin(self, batch: int, gap_s: float | None = None):
        if batch in BATCH_START and self.clock < BATCH_START[batch]:
            self.clock = BATCH_START[batch]
        self.clock += timedelta(seconds=gap_s if gap_s is not None else self.rng.uniform(3, 90),
                                microseconds=self.rng.randrange(1, 999_999))
        self.txid += self.rng.randrange(1, 4)
        self.lsn += self.rng.randrange(2, 40) * 8  # BEGIN etc.
        lag_us = self.rng.randrange(120_000, 900_000)
        self._tx = {"batch": batch, "commit": self.clock, "txId": self.txid,
                    "source_ts_us": _us(self.clock), "ts_us": _us(self.clock) + lag_us}

    def commit(self):
        self.lsn += 0x30
        self.last_commit_lsn = self.lsn
        self._tx = None

    def _event(self, table, op, before, after, **override) -> dict:
        tx = self._tx
        self.lsn += self.rng.randrange(5, 25) * 8
        ev = {"table": table, "op": op, "before": before, "after": after, "lsn": self.lsn,
              "last_commit_lsn": self.last_commit_lsn, "txId": tx["txId"],
              "source_ts_us": tx["source_ts_us"], "ts_us": tx["ts_us"], "snapshot": "false"}
        if table in self.altered:
            ev["altered"] = True
        ev.update(override)
        self.batches[tx["batch"]].append(ev)
        return ev

    @staticmethod
    def _generate(table: str, row: dict) -> dict:
        for column, expression in pagila.GENERATED.get(table, {}).items():
            row[column] = expression(row)
        return row

    def insert(self, table: str, row: dict) -> dict:
        row = dict(row)
        if "last_update" in self.schema[table]["columns"]:
            row["last_update"] = self._tx["commit"]
        full = self._generate(table, {c: row.get(c) for c in self.columns(table)})
        k = self.key(table, full)
        assert k not in self.state[table], (table, k)
        self.state[table][k] = full
        return self._event(table, "c", None, dict(full))

    def update(self, table: str, key: tuple, unavailable: tuple[str, ...] = (), **changes) -> dict:
        """`unavailable`: columns sent as unchanged TOASTed values (not among `changes`)."""
        assert table != "country"
        assert not set(unavailable) & set(changes), "a changed value is always sent"
        row = dict(self.state[table][key])
        row.update(changes)
        if "last_update" in row:
            row["last_update"] = self._tx["commit"]
        self.state[table][key] = self._generate(table, row)
        if unavailable:
            return self._event(table, "u", None, dict(row), unavailable=tuple(unavailable))
        return self._event(table, "u", None, dict(row))

    def delete(self, table: str, key: tuple) -> dict:
        assert table != "country"
        row = self.state[table].pop(key)
        return self._event(table, "d", dict(row), None)

    def late_update(self, table: str, key: tuple, older_than: dict, **changes) -> dict:
        """An update delivered now whose LSN/txId/commit time are older than `older_than`
        (the row's latest event so far); its processing ts_ms is the newest. Not applied."""
        row = dict(self.state[table][key])
        row.update(changes)
        commit = datetime(1970, 1, 1) + timedelta(microseconds=older_than["source_ts_us"] - 2_500_000)
        row["last_update"] = commit
        tx = self._tx
        return self._event(table, "u", None, row, lsn=older_than["lsn"] - 8,
                           last_commit_lsn=older_than["last_commit_lsn"] - 0x48,
                           txId=older_than["txId"] - 1, source_ts_us=_us(commit),
                           ts_us=tx["ts_us"])


def fulltext_for(title: str, description: str) -> str:
    words = {}
    for i, w in enumerate((title + " " + description).lower().split(), 1):
        if len(w) > 2 and w not in ("who", "the", "and", "must"):
            words.setdefault(w, []).append(i)
    return " ".join(f"'{w}':" + ",".join(map(str, p)) for w, p in sorted(words.items()))


NEW_ACTORS = [("MARGOT", "ROBBIE"), ("OSCAR", "ISAAC"), ("LUPITA", "NYONGO"),
              ("DEV", "PATEL"), ("FLORENCE", "PUGH"), ("RIZ", "AHMED"), ("ANYA", "TAYLOR")]
NEW_COUNTRIES = ["Iceland", "Luxembourg", "Slovenia", "Uruguay", "Jamaica", "Mongolia"]
NEW_CITIES = {"Iceland": "Reykjavik", "Luxembourg": "Esch-sur-Alzette", "Slovenia": "Ljubljana",
              "Uruguay": "Montevideo", "Jamaica": "Kingston", "Mongolia": "Ulaanbaatar"}


WORDS = ("lakehouse", "harbor", "ledger", "offset", "replica", "snapshot", "broker", "drama",
         "saga", "chronicle", "dragon", "astronaut", "teacher", "mad", "scientist", "canyon",
         "monastery", "boat", "epistle", "tale", "story", "reflection", "feminist", "mysql",
         "postgres", "lighthouse", "orchard", "compass", "quiet", "thunder", "salt", "glass")


def long_text(rng: random.Random, words: int) -> str:
    """Several kilobytes of text: stored out of line (TOASTed) by PostgreSQL."""
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def store_batch2(w: Workload, film_id: int) -> dict:
    """Batch-2 changes of the store tables (staff, customer, inventory, rental, payment)
    and the unchanged-TOAST cases of film. Returns what batch 3 builds on."""
    rng, st = w.rng, w.state
    # ---- choices (seeded) ----------------------------------------------------------
    active = sorted(k for k, r in st["customer"].items() if r["activebool"])
    inactive = sorted(k for k, r in st["customer"].items() if not r["activebool"])
    c_deact, c_email = rng.sample(active, 2)
    c_react = rng.choice(inactive)
    open_rentals = sorted(k for k, r in st["rental"].items() if r["rental_period"]["upper"] is None)
    r_return = rng.choice(open_rentals)
    paid = sorted(k for k, r in st["payment"].items() if r["amount"] >= 1)
    p_amount, p_del, p_refund_of = rng.sample(paid, 3)
    february = sorted(k for k, r in st["payment"].items()
                      if r["payment_date"].year == 2007 and r["payment_date"].month == 2)
    p_move = rng.choice([k for k in february if k not in (p_amount, p_del, p_refund_of)])
    i_move = rng.choice(sorted(k for k, r in st["inventory"].items() if r["store_id"] == 1))
    f_toast = rng.choice(sorted(k for k in st["film"] if k[0] != film_id))
    address_id = rng.choice(sorted(k[0] for k in st["address"]))
    next_customer = max(k[0] for k in st["customer"]) + 1
    next_staff = max(k[0] for k in st["staff"]) + 1
    next_inventory = max(k[0] for k in st["inventory"]) + 1
    next_rental = max(k[0] for k in st["rental"]) + 1
    next_payment = max(k[0] for k in st["payment"]) + 1

    def rental_period(lower, upper=None, upper_inclusive=False):
        return {"lower": lower, "upper": upper, "lower_inclusive": True,
                "upper_inclusive": upper_inclusive, "is_empty": False}

    # ---- staff: a big picture (TOASTed), then updates that leave it unchanged ---------
    w.begin(2)
    w.update("staff", (1,), email="mike.hillyer@pagila.example", picture=rng.randbytes(6000))
    w.update("staff", (2,), password=None)
    w.insert("staff", {"staff_id": next_staff, "first_name": "Ada", "last_name": "Okafor",
                       "address_id": address_id, "email": None, "store_id": 2, "active": False,
                       "username": "Ada", "password": None, "picture": None})
    w.commit()
    w.begin(2)
    w.update("staff", (1,), unavailable=("picture",), last_name="Hillyer-Smith")
    w.commit()
    w.note("toast_unavailable_same_batch", "staff", (1,), [2],
           "flattened bytea: 6000-byte picture, then an update sending the placeholder bytes")
    w.note("update_to_null", "staff", (2,), [2], "password set to NULL")
    w.note("insert", "staff", (next_staff,), [2, 3], "picture NULL; deleted in batch 3")

    # ---- film: long text and text[] values, then updates that leave them unchanged ----
    w.begin(2)
    title = st["film"][f_toast]["title"]
    description = long_text(rng, 700)
    w.update("film", f_toast, description=description,
             special_features=[f"Commentary track {i}: " + long_text(rng, 6) for i in range(1, 61)],
             fulltext=fulltext_for(title, description))
    w.commit()
    w.begin(2)
    w.update("film", f_toast, unavailable=("description", "special_features"), rental_rate=Decimal("1.99"))
    w.commit()
    w.note("toast_unavailable_same_batch", "film", f_toast, [2, 3],
           "long description (text) and special_features (text[]) set, then an update sending "
           "placeholders in the same batch, and again in batch 3")

    # ---- customers: generated column `active` follows activebool -------------------------
    c_new, c_tmp = (next_customer,), (next_customer + 1,)
    w.begin(2)
    w.insert("customer", {"customer_id": c_new[0], "store_id": 1, "first_name": "ZOE",
                          "last_name": "NAKAMURA", "email": "ZOE.NAKAMURA@sakilacustomer.org",
                          "address_id": address_id, "activebool": True, "create_date": w.clock.date()})
    w.insert("customer", {"customer_id": c_tmp[0], "store_id": 2, "first_name": "TEMP",
                          "last_name": "ACCOUNT", "email": None, "address_id": address_id,
                          "activebool": False, "create_date": date(2024, 6, 1)})
    w.update("customer", c_deact, activebool=False)
    w.update("customer", c_react, activebool=True)
    w.update("customer", c_email, email=None)
    w.commit()
    w.note("generated_column", "customer", c_deact, [2], "activebool true -> false: active 1 -> 0")
    w.note("generated_column", "customer", c_react, [2], "activebool false -> true: active 0 -> 1")
    w.note("generated_column", "customer", c_new, [2, 3], "inserted active, deactivated in batch 3")
    w.note("update_to_null", "customer", c_email, [2], "email set to NULL")

    # ---- inventory, rentals, payments ------------------------------------------------------
    i_new, i_spare = (next_inventory,), (next_inventory + 1,)
    w.begin(2)
    w.insert("inventory", {"inventory_id": i_new[0], "film_id": film_id, "store_id": 1})
    w.insert("inventory", {"inventory_id": i_spare[0], "film_id": film_id, "store_id": 2})
    w.update("inventory", i_move, store_id=2)
    w.commit()
    w.note("insert", "inventory", i_new, [2], "flattened; a copy of a batch-2 film")
    w.note("update", "inventory", i_move, [2], "moved to store 2")

    r_new, r_booked, r_cancel = (next_rental,), (next_rental + 1,), (next_rental + 2,)
    p_new = (next_payment,)
    w.begin(2)
    w.insert("rental", {"rental_id": r_new[0], "inventory_id": i_new[0], "customer_id": c_new[0],
                        "staff_id": 1, "rental_period": rental_period(w.clock)})
    w.insert("payment", {"payment_id": p_new[0], "customer_id": c_new[0], "staff_id": 1,
                         "rental_id": r_new[0], "amount": Decimal("3.99"), "payment_date": w.clock})
    w.commit()
    w.note("open_range", "rental", r_new, [2, 3], "tsrange with an open upper bound; returned in batch 3")
    w.note("insert", "payment", p_new, [2, 3], "for the new rental; amount changed in batch 3")

    w.begin(2)
    lower = st["rental"][r_return]["rental_period"]["lower"]
    w.update("rental", r_return, rental_period=rental_period(lower, w.clock))
    booked_from = w.clock.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    w.insert("rental", {"rental_id": r_booked[0], "inventory_id": i_move[0], "customer_id": c_react[0],
                        "staff_id": 2, "rental_period": rental_period(
                            booked_from, booked_from + timedelta(days=3, hours=23, minutes=59, seconds=59),
                            upper_inclusive=True)})
    w.insert("rental", {"rental_id": r_cancel[0], "inventory_id": i_move[0], "customer_id": c_deact[0],
                        "staff_id": 2, "rental_period": rental_period(w.clock)})
    w.commit()
    w.note("close_open_range", "rental", r_return, [2], "a snapshot rental with an open upper bound is returned")
    w.note("inclusive_range", "rental", r_booked, [2, 3], "tsrange [a,b] (upper inclusive); deleted in batch 3")
    w.note("empty_range", "rental", r_cancel, [2, 3], "open range, set to 'empty' in batch 3")

    p_refund = (next_payment + 1,)
    w.begin(2)
    refunded = st["payment"][p_refund_of]
    w.insert("payment", {"payment_id": p_refund[0], "customer_id": refunded["customer_id"], "staff_id": 2,
                         "rental_id": refunded["rental_id"], "amount": -refunded["amount"],
                         "payment_date": w.clock})
    w.update("payment", p_amount, amount=st["payment"][p_amount]["amount"] + Decimal("1.00"))
    w.commit()
    w.note("negative_decimal", "payment", p_refund, [2, 3], "a refund; deleted in batch 3")
    w.note("update", "payment", p_amount, [2], "amount + 1.00")

    # UPDATE moving a row to another partition: pgoutput sends a delete and an insert
    w.begin(2)
    moved = dict(st["payment"][p_move])
    w.delete("payment", p_move)
    moved["payment_date"] = moved["payment_date"] + timedelta(days=31)
    w.insert("payment", moved)
    w.commit()
    w.note("cross_partition_update", "payment", p_move, [2],
           "payment_date moved from February to March: a delete and an insert, one transaction")
    w.begin(2)
    w.delete("payment", p_del)
    w.commit()
    w.note("delete_snapshot_row", "payment", p_del, [2], "before: the key, other columns zeros")

    return {"c_new": c_new, "c_tmp": c_tmp, "staff_new": (next_staff,), "f_toast": f_toast, "r_return": r_return,
            "i_spare": i_spare, "r_new": r_new, "r_booked": r_booked, "r_cancel": r_cancel,
            "p_new": p_new, "p_refund": p_refund, "next_payment": next_payment + 2}


def store_batch3(w: Workload, ctx: dict) -> None:
    st = w.state
    w.begin(3)
    w.update("staff", (1,), unavailable=("picture",), store_id=2)
    w.update("film", ctx["f_toast"], unavailable=("description", "special_features"), length=99)
    w.delete("staff", ctx["staff_new"])
    w.commit()
    w.note("toast_unavailable_next_batch", "staff", (1,), [3],
           "placeholder for the picture set in batch 2: the stored value is kept")
    w.note("toast_unavailable_next_batch", "film", ctx["f_toast"], [3],
           "placeholders for description and special_features set in batch 2")

    # Pagila has no timestamptz / tstzrange column: add two to rental while capturing
    w.begin(3)
    w.alter_add_columns("rental")
    w.commit()

    def window(lower, upper):
        return {"lower": lower, "upper": upper, "lower_inclusive": True, "upper_inclusive": False,
                "is_empty": False}

    w.begin(3)
    period = dict(st["rental"][ctx["r_new"]]["rental_period"], upper=w.clock)
    w.update("rental", ctx["r_new"], rental_period=period, checked_at=w.clock,
             return_window=window(period["lower"], period["lower"] + timedelta(days=7)))
    w.update("rental", ctx["r_return"], return_window={
        "lower": None, "upper": None, "lower_inclusive": False, "upper_inclusive": False, "is_empty": True})
    w.insert("payment", {"payment_id": ctx["next_payment"], "customer_id": ctx["c_new"][0], "staff_id": 1,
                         "rental_id": ctx["r_new"][0], "amount": Decimal("999.99"), "payment_date": w.clock})
    w.update("payment", ctx["p_new"], amount=Decimal("4.99"))
    w.update("customer", ctx["c_new"], activebool=False)
    w.commit()
    w.note("insert", "payment", (ctx["next_payment"],), [3], "999.99, the largest numeric(5,2)")
    w.note("added_column", "rental", ctx["r_new"], [3],
           "ALTER TABLE rental ADD checked_at timestamptz, return_window tstzrange; both set (ZonedTimestamp, "
           "tstzrange text with +00); rows not changed since keep NULL")
    w.note("added_column", "rental", ctx["r_return"], [3], "return_window set to 'empty'")

    w.begin(3)
    w.update("rental", ctx["r_cancel"], rental_period={
        "lower": None, "upper": None, "lower_inclusive": False, "upper_inclusive": False, "is_empty": True},
        return_window=window(w.clock, None))
    w.delete("rental", ctx["r_booked"])
    w.delete("payment", ctx["p_refund"])
    w.delete("inventory", ctx["i_spare"])
    w.delete("customer", ctx["c_tmp"])
    w.commit()
    w.note("delete_of_batch2_insert", "rental", ctx["r_booked"], [2, 3], "flattened delete")
    w.note("delete_of_batch2_insert", "payment", ctx["p_refund"], [2, 3])
    w.note("delete_of_batch2_insert", "inventory", ctx["i_spare"], [2, 3], "flattened delete")
    w.note("delete_of_batch2_insert", "customer", ctx["c_tmp"], [2, 3])


def build(schema: dict, rows: dict[str, list[dict]], seed: int) -> Workload:
    w = Workload(schema, rows, seed)
    rng = w.rng
    w.snapshot()
    st = w.state

    # ---- choices (seeded) ----------------------------------------------------------
    actor_ids = rng.sample(sorted(k[0] for k in st["actor"]), 4)
    a_twice, a_late, a_del, a_b3 = actor_ids
    films = sorted(k[0] for k in st["film"])
    f_rate, f_null, f_other = rng.sample(films, 3)
    fa_keys = sorted(k for k in st["film_actor"] if k[0] not in actor_ids)
    fa_del = rng.sample(fa_keys, 3)
    fa_reinsert = rng.choice([k for k in fa_keys if k not in fa_del])
    fc_keys = sorted(st["film_category"])
    fc_pick = rng.sample(fc_keys, 6)
    fc_del_b2, fc_cross, fc_same, fc_del_b3a, fc_del_b3b = fc_pick[:5]
    referenced_cities = {r["city_id"] for r in st["address"].values()}
    city_unref = sorted(k for k in st["city"] if k[0] not in referenced_cities)
    city_ids = rng.sample(sorted(k for k in st["city"] if k not in city_unref), 3)
    c_twice, c_late, c_b3 = city_ids
    addr_null = rng.choice(sorted(st["address"]))
    cat = rng.choice(sorted(st["category"]))
    countries_present = {r["country"] for r in st["country"].values()}
    new_countries = [c for c in NEW_COUNTRIES if c not in countries_present][:2]
    names = rng.sample(NEW_ACTORS, 3)
    next_actor = max(k[0] for k in st["actor"]) + 1
    next_film = max(films) + 1
    next_country = max(k[0] for k in st["country"]) + 1
    next_city = max(k[0] for k in st["city"]) + 1
    next_address = max(k[0] for k in st["address"]) + 1
    unused_langs = sorted(k for k in st["language"]
                          if k[0] not in {r["language_id"] for r in st["film"].values()})
    lang_reinsert = unused_langs[-1]
    lang_update = unused_langs[0]

    # ================= batch 2 ======================================================
    w.begin(2)
    new_actor_keys = []
    for i, (fn, ln) in enumerate(names):
        w.insert("actor", {"actor_id": next_actor + i, "first_name": fn, "last_name": ln})
        new_actor_keys.append((next_actor + i,))
    w.commit()
    for k in new_actor_keys:
        w.note("insert", "actor", k, [2])

    f_new, f_new2 = next_film, next_film + 1
    w.begin(2)
    title, desc = "ZEPPELIN HARBOR", "A Thoughtful Saga of a Lakehouse And a Dragon who must Stream a Log in A Data Center"
    w.insert("film", {"film_id": f_new, "title": title, "description": desc, "release_year": 2024,
                      "language_id": 1, "original_language_id": None, "rental_duration": 5,
                      "rental_rate": Decimal("3.99"), "length": 117,
                      "replacement_cost": Decimal("24.99"), "rating": "PG-13",
                      "special_features": ["Trailers", "Commentaries"],
                      "fulltext": fulltext_for(title, desc)})
    title2, desc2 = "QUIET OFFSET", "A Unbelieveable Documentary of a Kafka Broker And a Robot who must Replay a Topic in Berlin"
    w.insert("film", {"film_id": f_new2, "title": title2, "description": desc2, "release_year": 2023,
                      "language_id": 1, "original_language_id": lang_update[0], "rental_duration": 3,
                      "rental_rate": Decimal("0.99"), "length": None,
                      "replacement_cost": Decimal("9.99"), "rating": "NC-17",
                      "special_features": [], "fulltext": fulltext_for(title2, desc2)})
    fa_new = [(new_actor_keys[0][0], f_new), (new_actor_keys[1][0], f_new), (a_b3, f_new),
              (new_actor_keys[1][0], f_new2), (new_actor_keys[0][0], f_other)]
    for a, f in fa_new:
        w.insert("film_actor", {"actor_id": a, "film_id": f})
    fc_new = [(f_new, cat[0]), (f_new2, fc_cross[1])]
    for f, c in fc_new:
        w.insert("film_category", {"film_id": f, "category_id": c})
    w.commit()
    w.note("insert_null_column", "film", (f_new,), [2, 3],
           "new film with original_language_id NULL; deleted in batch 3 with its children")
    w.note("insert_empty_array", "film", (f_new2,), [2, 3],
           "special_features = [] and length NULL; batch 3 sets special_features NULL")

    w.begin(2)
    country_id, city_id, address_id = next_country, next_city, next_address
    w.insert("country", {"country_id": country_id, "country": new_countries[0]})
    w.insert("city", {"city_id": city_id, "city": NEW_CITIES[new_countries[0]], "country_id": country_id})
    w.insert("address", {"address_id": address_id, "address": "12 Laugavegur Street",
                         "address2": None, "district": "Hofudborgarsvaedi", "city_id": city_id,
                         "postal_code": "101", "phone": "3545512345"})
    w.commit()
    w.note("insert", "country", (country_id,), [2])
    w.note("insert", "city", (city_id,), [2, 3], "deleted in batch 3 (flattened delete)")
    w.note("insert", "address", (address_id,), [2, 3], "deleted in batch 3")

    # two updates of one row in ONE transaction: equal source.ts_ms and ts_ms, LSN increases
    w.begin(2)
    e1 = w.update("actor", (a_twice,), last_name="FIRSTVALUE")
    e2 = w.update("actor", (a_twice,), last_name="SECONDVALUE")
    assert e1["ts_us"] == e2["ts_us"] and e1["source_ts_us"] == e2["source_ts_us"] and e1["lsn"] < e2["lsn"]
    e3 = w.update("city", c_twice, city=st["city"][c_twice]["city"] + " (old)")
    e4 = w.update("city", c_twice, city=st["city"][c_twice]["city"].replace(" (old)", "") + " Centro")
    assert e3["ts_us"] == e4["ts_us"] and e3["lsn"] < e4["lsn"]
    w.commit()
    w.note("two_updates_one_tx", "actor", (a_twice,), [2], "last_name FIRSTVALUE then SECONDVALUE; SECONDVALUE wins")
    w.note("two_updates_one_tx", "city", c_twice, [2], "flattened; the second update (… Centro) wins")

    w.begin(2)
    late_target_actor = w.update("actor", (a_late,), first_name="UPDATED")
    w.update("film", (f_rate,), rental_rate=Decimal("2.49"), special_features=["Trailers"])
    w.update("film", (f_null,), length=None, description=None)
    w.update("address", addr_null, postal_code=None, address2="Suite 4")
    w.update("category", cat, name=st["category"][cat]["name"] + " & More")
    w.update("language", lang_update, name="Klingon".ljust(20))
    w.commit()
    w.note("late_event_target", "actor", (a_late,), [2, 3], "batch 2 sets first_name UPDATED")
    w.note("update", "film", (f_rate,), [2, 3], "rental_rate 2.49 in batch 2, 5.99 in batch 3")
    w.note("update_to_null", "film", (f_null,), [2], "length and description set to NULL")
    w.note("update_to_null", "address", addr_null, [2, 3], "postal_code set to NULL")
    w.note("update", "category", cat, [2])
    w.note("update", "language", lang_update, [2], "bpchar(20) keeps its padding")

    w.begin(2)
    late_target_city = w.update("city", c_late, city="Updated City")
    w.commit()
    w.note("late_event_target", "city", c_late, [2, 3], "flattened; batch 2 sets city 'Updated City'")

    # deletes of snapshot rows
    w.begin(2)
    for k in fa_del:
        w.delete("film_actor", k)
    w.commit()
    for k in fa_del:
        w.note("delete_snapshot_row", "film_actor", k, [2])
    w.begin(2)
    children = sorted(k for k in st["film_actor"] if k[0] == a_del)
    for k in children:
        w.delete("film_actor", k)
    w.delete("actor", (a_del,))
    w.commit()
    w.note("delete_snapshot_row", "actor", (a_del,), [2], f"with its {len(children)} film_actor rows first")
    w.begin(2)
    w.delete("film_category", fc_del_b2)
    w.delete("film_category", fc_cross)
    w.delete("city", city_unref[0])
    w.commit()
    w.note("delete_snapshot_row", "film_category", fc_del_b2, [2], "flattened delete")
    w.note("delete_then_reinsert_across_batches", "film_category", fc_cross, [2, 3],
           "flattened; deleted in batch 2, re-inserted in batch 3")
    w.note("delete_snapshot_row", "city", city_unref[0], [2], "flattened delete")

    store = store_batch2(w, film_id=f_new2)

    # ================= batch 3 ======================================================
    # the late event first: older LSN than the row's batch-2 event, newest ts_ms
    w.begin(3, gap_s=20)
    w.late_update("actor", (a_late,), late_target_actor, first_name="STALE")
    w.late_update("city", c_late, late_target_city, city="Stale City")
    w.commit()
    w.note("late_event", "actor", (a_late,), [3], "LSN below its batch-2 update, higher ts_ms; must not win")
    w.note("late_event", "city", c_late, [3], "flattened; LSN below its batch-2 update; must not win")

    w.begin(3)
    for k in [(new_actor_keys[0][0], f_new), (new_actor_keys[1][0], f_new), (a_b3, f_new)]:
        w.delete("film_actor", k)
    w.delete("film_category", (f_new, cat[0]))
    w.delete("film", (f_new,))
    w.delete("actor", new_actor_keys[2])
    w.commit()
    w.note("delete_of_batch2_insert", "film", (f_new,), [2, 3])
    w.note("delete_of_batch2_insert", "actor", new_actor_keys[2], [2, 3])
    w.note("delete_of_batch2_insert", "film_actor", (new_actor_keys[0][0], f_new), [2, 3])

    w.begin(3)
    w.delete("film_actor", fa_reinsert)
    w.delete("language", lang_reinsert)
    w.delete("film_category", fc_same)
    w.commit()
    w.begin(3)
    w.insert("film_actor", {"actor_id": fa_reinsert[0], "film_id": fa_reinsert[1]})
    w.insert("language", {"language_id": lang_reinsert[0], "name": "Deutsch".ljust(20)})
    w.insert("film_category", {"film_id": fc_same[0], "category_id": fc_same[1]})
    w.insert("film_category", {"film_id": fc_cross[0], "category_id": fc_cross[1]})
    w.commit()
    w.note("delete_then_reinsert", "film_actor", fa_reinsert, [3])
    w.note("delete_then_reinsert", "language", lang_reinsert, [3], "re-inserted as 'Deutsch'")
    w.note("delete_then_reinsert", "film_category", fc_same, [3], "flattened")

    w.begin(3)
    w.update("actor", (a_twice,), first_name="THIRD", last_name="UPDATE")
    w.update("film", (f_rate,), rental_rate=Decimal("5.99"), original_language_id=lang_update[0])
    w.update("film", (f_new2,), special_features=None, replacement_cost=Decimal("119.99"))
    w.update("city", c_twice, city="Twice Updated Again")
    w.update("address", addr_null, phone="5550001111")
    w.update("actor", (a_b3,), last_name="CHANGED")
    w.commit()
    w.note("update_again", "actor", (a_twice,), [2, 3])
    w.note("update_again", "city", c_twice, [2, 3], "flattened")
    w.note("update", "actor", (a_b3,), [3])

    w.begin(3)
    w.delete("address", (address_id,))
    w.delete("city", (city_id,))
    w.delete("film_category", fc_del_b3a)
    w.delete("film_category", fc_del_b3b)
    for k in sorted(k for k, r in st["address"].items() if r["city_id"] == c_b3[0]):
        w.update("address", k, city_id=c_twice[0])  # move the addresses first (FK)
    w.delete("city", c_b3)
    w.commit()
    w.note("delete", "city", (city_id,), [3], "flattened delete of a batch-2 insert")
    w.note("delete_snapshot_row", "city", c_b3, [3], "flattened; its addresses moved to another city first")
    w.note("delete_snapshot_row", "film_category", fc_del_b3a, [3], "flattened delete")
    w.note("delete_snapshot_row", "film_category", fc_del_b3b, [3], "flattened delete")

    w.begin(3)
    w.insert("country", {"country_id": country_id + 1, "country": new_countries[1]})
    w.commit()
    w.note("insert", "country", (country_id + 1,), [3])

    store_batch3(w, store)
    return w
