"""A query-based source: northwind.products (stack/sql/northwind.sql) as a JDBC-style
source connector in timestamp mode publishes it: each poll reads the rows whose
`updated_at` is past the last one seen and sends each as a plain record (JsonConverter,
schemas off): only the columns, no op, no before image, no source block. `updated_at`
is Kafka Connect's Timestamp (epoch milliseconds), `unit_price` a Connect Decimal
(base64 two's-complement bytes, scale 2). One batch is one poll.

Prices and names are invented. A product changed twice between two polls is sent once,
in its last state; a delete is never seen.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from decimal import Decimal

from testdata.debezium import decimal_bytes

TABLE = "products"
TOPIC = "query.northwind.products"
PRIMARY_KEY = ["product_id"]
UPDATED_AT = "updated_at"
COLUMNS = {"product_id": "int4", "product_name": "text", "unit_price": "numeric(10,2)", "updated_at": "timestamptz"}
SCALE = 2
START = datetime(2024, 6, 3, 7, 0, 0)

PRODUCTS = [
    (1, "Barley tea", "4.50"), (2, "Smoked trout", "18.25"), (3, "Rye crackers", "3.10"),
    (4, "Cloudberry jam", "9.95"), (5, "Goat cheese", "12.40"), (6, "Pickled herring", "7.80"),
    (7, "Oat biscuits", "2.35"), (8, "Sea buckthorn juice", "6.60"),
]


def epoch_ms(value: datetime) -> int:
    delta = value - datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


class PolledWorkload:
    def __init__(self) -> None:
        self.state: dict[int, dict] = {}
        self.states: dict[int, dict[int, dict]] = {}
        self.batches: dict[int, list[dict]] = {1: [], 2: [], 3: []}
        self.clock = START

    def _write(self, product_id: int, **values) -> None:
        self.clock += timedelta(seconds=11, microseconds=250_000)
        row = self.state.setdefault(product_id, {"product_id": product_id})
        row.update(values, updated_at=self.clock)

    def _poll(self, batch: int, since: datetime | None) -> None:
        changed = [r for r in self.state.values() if since is None or r["updated_at"] > since]
        self.batches[batch] = [copy.deepcopy(r) for r in sorted(changed, key=lambda r: (r["updated_at"], r["product_id"]))]
        self.states[batch] = copy.deepcopy(self.state)

    def build(self) -> "PolledWorkload":
        for product_id, name, price in PRODUCTS:
            self._write(product_id, product_name=name, unit_price=Decimal(price))
        self._poll(1, None)
        last = self.clock
        self._write(2, unit_price=Decimal("19.10"))
        self._write(9, product_name="Lingonberry syrup", unit_price=Decimal("5.45"))
        self._write(2, unit_price=Decimal("19.60"))  # twice between two polls: only this one is sent
        self._poll(2, last)
        last = self.clock
        self._write(4, product_name="Cloudberry jam, large")
        self._write(9, unit_price=Decimal("5.95"))
        self._poll(3, last)
        return self

    def expected_rows(self, batch: int = 3) -> list[dict]:
        """Silver `products` once batches 1..batch are built."""
        return [{**r, "updated_at": r["updated_at"].replace(microsecond=r["updated_at"].microsecond // 1000 * 1000)}
                for _, r in sorted(self.states[batch].items())]


def build() -> PolledWorkload:
    return PolledWorkload().build()


def record_value(row: dict) -> dict:
    return {"product_id": row["product_id"], "product_name": row["product_name"],
            "unit_price": decimal_bytes(row["unit_price"], SCALE), "updated_at": epoch_ms(row["updated_at"])}
