"""A third source: the outbox tables of stack/sql/northwind.sql, captured by the Debezium
PostgreSQL connector `northwind-outbox` as envelopes with JsonConverter schemas off, one
partition each: northwind.cdc_events (an event log, one row per event) and
northwind.order_outbox (the current document per order, updated in place).

Orders and their items are invented here. Every change of an order writes one event
whose `payload` is the order's whole JSON document (a JSON string, as Debezium sends
`jsonb`: io.debezium.data.Json); a deleted order's event carries its key only. Batch 1
is the snapshot (all events at one LSN); batch 2 changes orders, items and adds an
order (several events in one transaction); batch 3 deletes an order and purges the
oldest outbox rows (deletes of cdc_events, each followed by a tombstone), which gold
must ignore. order_outbox gets the same changes as row changes of one row per order:
created (r in the snapshot, else c), updated (u) and deleted (d) with the order.
"""

from __future__ import annotations

import copy
import json
from datetime import date, datetime, timedelta
from decimal import Decimal

from testdata.debezium import CONNECTOR_VERSION, encode_row, zoned_timestamp

SERVER_NAME = "outbox"
DB_NAME = "pagila"
PG_SCHEMA = "northwind"
TABLE = "cdc_events"
TOPIC = f"{SERVER_NAME}.{PG_SCHEMA}.{TABLE}"
PRIMARY_KEY = ["event_id"]
COLUMNS = {"event_id": "int8", "aggregate_type": "text", "aggregate_id": "text", "event_type": "text",
           "payload": "jsonb", "created_at": "timestamptz"}

DOCUMENT_TABLE = "order_outbox"
DOCUMENT_TOPIC = f"{SERVER_NAME}.{PG_SCHEMA}.{DOCUMENT_TABLE}"
DOCUMENT_KEY = ["order_id"]
DOCUMENT_COLUMNS = {"order_id": "integer", "customer_id": "integer", "order_date": "date", "status": "text",
                    "ship_country": "text", "freight": "numeric(10,2)", "items": "jsonb", "customer": "jsonb",
                    "updated_at": "timestamp with time zone"}
# What a delete's before image holds besides the key (REPLICA IDENTITY DEFAULT).
DOCUMENT_DELETE = {"primary_key": DOCUMENT_KEY, "defaults": {"updated_at": "1970-01-01T00:00:00.000000Z"},
                   "not_null": {"customer_id", "order_date", "status", "freight", "items", "customer", "updated_at"}}
CUSTOMERS = {1: ("Alder Trading", "Norway"), 2: ("Birchwood Foods", "Canada"), 3: ("Cedar Market", "Chile"),
             4: ("Dune Grocers", "Morocco"), 5: ("Elm Street Deli", "Ireland"), 6: ("Fjord Provisions", "Iceland")}

START = datetime(2024, 6, 3, 8, 0, 0)
SNAPSHOT_LSN = 40_000_000
PURGED_EVENTS = 3


def _order(order_id: int, customer_id: int, day: int, status: str, country: str | None, freight: str,
           items: dict[int, tuple[int, str, str]]) -> dict:
    return {"order_id": order_id, "customer_id": customer_id, "order_date": date(2024, 5, day),
            "status": status, "ship_country": country, "freight": Decimal(freight),
            "items": {p: {"quantity": q, "unit_price": Decimal(u), "discount": Decimal(d)}
                      for p, (q, u, d) in items.items()}}


ORDERS = [
    _order(2001, 1, 20, "shipped", "Norway", "12.50", {1: (10, "4.50", "0.00"), 4: (2, "9.95", "0.05")}),
    _order(2002, 2, 21, "packed", "Canada", "30.00", {2: (5, "18.25", "0.00"), 3: (20, "3.10", "0.10")}),
    _order(2003, 3, 22, "new", "Chile", "41.75", {5: (3, "12.40", "0.00")}),
    _order(2004, 4, 23, "new", None, "0.00", {6: (8, "7.80", "0.15"), 8: (6, "6.60", "0.00")}),
    _order(2005, 5, 24, "packed", "Ireland", "8.20", {1: (4, "4.50", "0.00")}),
]


def items_document(order: dict) -> list[dict]:
    return [{"product_id": p, "quantity": i["quantity"], "unit_price": float(i["unit_price"]),
             "discount": float(i["discount"])} for p, i in sorted(order["items"].items())]


def document_row(order: dict, updated_at: datetime) -> dict:
    """The order's row in northwind.order_outbox (jsonb columns as their text)."""
    name, country = CUSTOMERS[order["customer_id"]]
    return {**{k: v for k, v in order.items() if k != "items"}, "items": json.dumps(items_document(order)),
            "customer": json.dumps({"customer_id": order["customer_id"], "company_name": name, "country": country}),
            "updated_at": updated_at}


def document(order: dict) -> str:
    """The order as the trigger's jsonb, as text (numbers as numbers, items by product)."""
    items = [{"product_id": p, "quantity": i["quantity"], "unit_price": float(i["unit_price"]),
              "discount": float(i["discount"])} for p, i in sorted(order["items"].items())]
    return json.dumps({"order_id": order["order_id"], "customer_id": order["customer_id"],
                       "order_date": order["order_date"].isoformat(), "status": order["status"],
                       "ship_country": order["ship_country"], "freight": float(order["freight"]),
                       "items": items})


class OutboxWorkload:
    def __init__(self) -> None:
        self.state: dict[int, dict] = {}
        self.states: dict[int, dict[int, dict]] = {}  # the orders after each batch
        self.batches: dict[int, list[dict]] = {1: [], 2: [], 3: []}
        self.documents: dict[int, list[dict]] = {1: [], 2: [], 3: []}  # order_outbox's row changes
        self.next_event = 1
        self.lsn = SNAPSHOT_LSN
        self.tx = 900
        self.clock = START

    def _source(self, snapshot: str, lsn: int, tx: int) -> dict:
        ts_ms = int((self.clock - datetime(1970, 1, 1)).total_seconds() * 1000)
        return {"version": CONNECTOR_VERSION, "connector": "postgresql", "name": SERVER_NAME,
                "ts_ms": ts_ms, "snapshot": snapshot, "db": DB_NAME,
                "sequence": json.dumps([None, str(lsn)]), "ts_us": ts_ms * 1000, "ts_ns": ts_ms * 1_000_000,
                "schema": PG_SCHEMA, "table": TABLE, "txId": tx, "lsn": lsn, "xmin": None}

    def _event(self, batch: int, order_id: int, event_type: str, op: str, snapshot: str = "false") -> None:
        if event_type == "order_deleted":
            payload = json.dumps({"order_id": order_id})
        else:
            payload = document(self.state[order_id])
        row = {"event_id": self.next_event, "aggregate_type": "order", "aggregate_id": str(order_id),
               "event_type": event_type, "payload": payload, "created_at": zoned_timestamp(self.clock)}
        self.next_event += 1
        if op != "r":
            self.lsn += 1000
        self.clock += timedelta(seconds=7)
        self.batches[batch].append({"key": {"event_id": row["event_id"]}, "op": op, "before": None, "after": row,
                                    "source": self._source(snapshot, self.lsn, self.tx)})
        self._document(batch, order_id, event_type, op, snapshot)

    def _document(self, batch: int, order_id: int, event_type: str, op: str, snapshot: str) -> None:
        """The order's row change in order_outbox, written by the same trigger."""
        source = {**self._source(snapshot, self.lsn, self.tx), "table": DOCUMENT_TABLE}
        key = {"order_id": order_id}
        if event_type == "order_deleted":
            before = encode_row(DOCUMENT_COLUMNS, key, old_key_of=DOCUMENT_DELETE)
            change = {"op": "d", "before": before, "after": None}
        else:
            after = encode_row(DOCUMENT_COLUMNS, document_row(self.state[order_id], self.clock))
            change = {"op": "r" if op == "r" else "c" if event_type == "order_created" else "u",
                      "before": None, "after": after}
        self.documents[batch].append({"key": key, **change, "source": source})

    def _purge(self, batch: int, event_id: int) -> None:
        """DELETE FROM cdc_events (REPLICA IDENTITY DEFAULT: the key, NOT NULL columns their zero)."""
        self.lsn += 1000
        before = {"event_id": event_id, "aggregate_type": "", "aggregate_id": "", "event_type": "",
                  "payload": "", "created_at": "1970-01-01T00:00:00.000000Z"}
        self.batches[batch].append({"key": {"event_id": event_id}, "op": "d", "before": before, "after": None,
                                    "source": self._source("false", self.lsn, self.tx)})

    def build(self) -> "OutboxWorkload":
        for n, order in enumerate(ORDERS):
            self.state[order["order_id"]] = copy.deepcopy(order)
            marker = "first" if n == 0 else "last" if n == len(ORDERS) - 1 else "true"
            self._event(1, order["order_id"], "order_created", "r", marker)
        self.states[1] = copy.deepcopy(self.state)
        # batch 2: a status change, an item's quantity, an item removed, a new order with two items (one transaction)
        self.tx += 1
        self.state[2002]["status"] = "shipped"
        self._event(2, 2002, "order_updated", "c")
        self.tx += 1
        self.state[2003]["items"][5]["quantity"] = 7
        self._event(2, 2003, "order_updated", "c")
        self.tx += 1
        del self.state[2004]["items"][8]
        self._event(2, 2004, "order_updated", "c")
        self.tx += 1
        self.state[2006] = _order(2006, 6, 25, "new", "Iceland", "19.90", {})
        self._event(2, 2006, "order_created", "c")
        self.state[2006]["items"][2] = {"quantity": 1, "unit_price": Decimal("18.25"), "discount": Decimal("0.00")}
        self._event(2, 2006, "order_updated", "c")
        self.state[2006]["items"][7] = {"quantity": 12, "unit_price": Decimal("2.35"), "discount": Decimal("0.00")}
        self._event(2, 2006, "order_updated", "c")
        self.states[2] = copy.deepcopy(self.state)
        # batch 3: an order deleted, another changed, the oldest outbox rows purged
        self.tx += 1
        del self.state[2005]
        self._event(3, 2005, "order_deleted", "c")
        self.tx += 1
        self.state[2001]["freight"] = Decimal("14.00")
        self.state[2001]["items"][4]["quantity"] = 3
        self._event(3, 2001, "order_updated", "c")
        self.tx += 1
        for event_id in range(1, PURGED_EVENTS + 1):
            self._purge(3, event_id)
        self.states[3] = copy.deepcopy(self.state)
        return self

    def expected_orders(self, batch: int = 3) -> list[dict]:
        """Gold `orders` once batches 1..batch are built."""
        return [{k: v for k, v in o.items() if k != "items"} for _, o in sorted(self.states[batch].items())]

    def expected_documents(self, batch: int = 3) -> list[dict]:
        """Gold `outbox_orders` once batches 1..batch are built."""
        return [{**{k: v for k, v in o.items() if k != "items"}, "customer_name": CUSTOMERS[o["customer_id"]][0],
                 "customer_country": CUSTOMERS[o["customer_id"]][1], "item_count": len(o["items"])}
                for _, o in sorted(self.states[batch].items())]

    def expected_items(self, batch: int = 3) -> list[dict]:
        """Gold `order_items` once batches 1..batch are built."""
        return [{"order_id": o, "product_id": p, **i}
                for o, order in sorted(self.states[batch].items()) for p, i in sorted(order["items"].items())]


def build() -> OutboxWorkload:
    return OutboxWorkload().build()


def record_value(event: dict) -> dict:
    """The envelope as JsonConverter writes it with schemas off."""
    ts_ms = event["source"]["ts_ms"] + 250
    return {"before": event["before"], "after": event["after"], "source": event["source"], "transaction": None,
            "op": event["op"], "ts_ms": ts_ms, "ts_us": ts_ms * 1000, "ts_ns": ts_ms * 1_000_000}
