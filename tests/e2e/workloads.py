"""Scripted changes the end-to-end test makes in the source databases.

Each inner list is one transaction. Rows the workloads add use ids from 30000 up (inside smallint: Pagila's foreign keys are smallint) so
they never collide with Pagila's own. Big values are built from md5 strings, which
PostgreSQL cannot compress below its TOAST threshold, so they are stored out of line
and a later update that does not touch them makes Debezium send
`__debezium_unavailable_value`.
"""

from __future__ import annotations

# ~12 kB of hex text: TOASTed out of line (pglz cannot shrink it under ~2 kB)
BIG_TEXT = "(select string_agg(md5(i::text), '') from generate_series(1, 400) as i)"
# 40 elements of 320 hex characters: a TOASTed text[]
BIG_ARRAY = "(select array_agg(repeat(md5(i::text), 10)) from generate_series(1, 40) as i)"
# 6.4 kB of md5 bytes: a TOASTed bytea
BIG_BYTES = "(select decode(string_agg(md5(i::text), ''), 'hex') from generate_series(1, 400) as i)"

POSTGRES_ROUND_1: list[list[str]] = [
    # inserts, NULLs, a date and booleans
    [
        "insert into actor (actor_id, first_name, last_name) values (30001, 'ADA', 'LOVELACE'), (30002, 'ALAN', 'TURING')",
        "insert into category (category_id, name) values (30001, 'Documentary Shorts')",
        "insert into address (address_id, address, address2, district, city_id, postal_code, phone)"
        " values (30001, '1 Analytical Engine Way', null, 'London', 312, null, '555-0101')",
        "insert into customer (customer_id, store_id, first_name, last_name, email, address_id, activebool, create_date)"
        " values (30001, 1, 'GRACE', 'HOPPER', null, 30001, false, date '1906-12-09')",
        "insert into inventory (inventory_id, film_id, store_id) values (30001, 1, 1)",
        "insert into rental (rental_id, inventory_id, customer_id, staff_id, rental_period)"
        " values (30001, 30001, 30001, 1, tsrange('2022-05-01 10:00:00', null))",
        "insert into payment (payment_id, customer_id, staff_id, rental_id, amount, payment_date)"
        " values (30001, 30001, 1, 30001, 3.99, '2022-05-01 10:00:00.123456')",
        "insert into film_category (film_id, category_id) values (1, 30001)",
        "insert into film_actor (actor_id, film_id) values (30001, 1)",
    ],
    # several updates of one row in one transaction (ordering inside a transaction)
    [
        "update actor set last_name = 'LOVELACE-1' where actor_id = 30001",
        "update actor set last_name = 'LOVELACE-2' where actor_id = 30001",
        "update actor set first_name = 'AUGUSTA' where actor_id = 30001",
        "update payment set amount = 4.99 where payment_id = 30001",
        "update payment set amount = 5.49 where payment_id = 30001",
    ],
    # a primary-key change (Debezium: delete of the old key, create of the new one)
    ["update actor set actor_id = 30003 where actor_id = 30002"],
    # deletes of Pagila rows and of rows added above
    [
        "delete from payment where payment_id in (select payment_id from payment order by payment_id limit 3)",
        "delete from film_actor where (actor_id, film_id) in (select actor_id, film_id from film_actor order by 1, 2 limit 2)",
        "delete from film_category where film_id = 2",
    ],
    # NULLs set and cleared, enum, domain, numeric, boolean, text[] changes
    [
        "update customer set email = null where customer_id = 1",
        "update address set address2 = null, postal_code = null where address_id = 5",
        "update film set rating = 'NC-17', release_year = 2026, rental_rate = 0.99, replacement_cost = 123.45,"
        " special_features = array['Trailers', 'Commentaries'] where film_id = 3",
        "update film set original_language_id = 2 where film_id = 4",
        "update staff set active = false where staff_id = 2",
        "update customer set activebool = true where customer_id = 30001",
        "update rental set rental_period = tsrange(lower(rental_period), '2022-05-03 09:30:00', '[)')"
        " where rental_id = 30001",
    ],
    # big values, stored out of line
    [
        f"update film set description = {BIG_TEXT}, special_features = {BIG_ARRAY} where film_id = 5",
        f"update staff set picture = {BIG_BYTES} where staff_id = 1",
    ],
    # updates that leave the big values unchanged: Debezium sends the TOAST placeholder
    [
        "update film set rental_rate = 1.99 where film_id = 5",
        "update staff set email = 'mike@example.org' where staff_id = 1",
    ],
    # a column added while capturing (timestamptz and tstzrange, which Pagila lacks)
    ["alter table rental add column checked_at timestamptz, add column return_window tstzrange"],
    [
        "update rental set checked_at = '2026-01-02 03:04:05.123456+02',"
        " return_window = tstzrange('2026-01-01 00:00:00+00', '2026-01-08 00:00:00+00', '[)')"
        " where rental_id in (1, 2)",
        "update rental set return_window = 'empty'::tstzrange where rental_id = 3",
        "insert into rental (rental_id, inventory_id, customer_id, staff_id, rental_period, checked_at, return_window)"
        " values (30002, 30001, 30001, 2, tsrange('2022-06-01 08:00:00', '2022-06-02 08:00:00', '[]'),"
        " '2022-06-01 08:00:00+00', tstzrange('2022-06-01 08:00:00+00', null))",
    ],
]

POSTGRES_ROUND_2_BEFORE_RESTART: list[list[str]] = [
    [
        "delete from film_actor where actor_id = 30001",
        "delete from actor where actor_id = 30001",
        "insert into payment (payment_id, customer_id, staff_id, rental_id, amount, payment_date)"
        " values (30002, 1, 1, 30002, 7.25, '2022-06-01 08:00:00')",
        "update inventory set store_id = 2 where inventory_id = 30001",
    ],
    # the deleted key comes back
    ["insert into actor (actor_id, first_name, last_name) values (30001, 'ADA', 'BYRON')"],
]

POSTGRES_ROUND_2_AFTER_RESTART: list[list[str]] = [
    [
        "update film set replacement_cost = 9.99 where film_id = 5",  # big values still unchanged
        "update staff set username = 'mike2' where staff_id = 1",
        "update rental set checked_at = null where rental_id = 1",
        "delete from payment where payment_id = 30001",
        "update customer set first_name = 'AMAZING', activebool = false where customer_id = 30001",
    ],
    [
        "update actor set last_name = 'KING' where actor_id = 30001",
        "delete from actor where actor_id = 30003",
    ],
]

MARIADB_ROUND_1: list[list[str]] = [
    [
        "insert into movies (movie_id, title, release_year) values (9001, 'The Binlog Position', 2024)",
        "update movies set title = concat(title, ' (remastered)') where movie_id = 1",
    ],
    ["delete from movies where movie_id = 2"],
    ["alter table movies add column country varchar(60)"],
    [
        "update movies set country = 'FR' where movie_id = 1",
        "insert into movies (movie_id, title, release_year, country) values (9002, 'Row Images', 2025, 'NZ')",
    ],
]

MARIADB_ROUND_2: list[list[str]] = [
    [
        "update movies set release_year = 2000 where movie_id = 9001",
        "update movies set release_year = 2001 where movie_id = 9001",
        "update movies set country = null where movie_id = 1",
    ],
    ["update movies set movie_id = 9003 where movie_id = 9002"],
]

# The Northwind orders behind the outbox (stack/sql/northwind.sql); every statement makes
# the triggers write events to northwind.cdc_events.
NORTHWIND_ROUND_1: list[list[str]] = [
    # a new order with its items: several events in one transaction
    [
        "insert into northwind.orders (order_id, customer_id, order_date, status, ship_country, freight)"
        " values (1007, 6, date '2026-03-10', 'new', 'Iceland', 22.40)",
        "insert into northwind.order_items (order_id, product_id, quantity, unit_price, discount)"
        " values (1007, 3, 6, 3.10, 0), (1007, 8, 2, 6.60, 0.05)",
    ],
    ["update northwind.orders set status = 'shipped', freight = 44.10 where order_id = 1003"],
    ["update northwind.order_items set quantity = quantity + 5 where order_id = 1002 and product_id = 3"],
    # an item removed
    ["delete from northwind.order_items where order_id = 1004 and product_id = 8"],
    # an order deleted (its items go by ON DELETE CASCADE)
    ["delete from northwind.orders where order_id = 1005"],
    # the same order changed several times in one transaction: only the last state counts
    [
        "update northwind.orders set freight = 16.25 where order_id = 1006",
        "insert into northwind.order_items (order_id, product_id, quantity, unit_price) values (1006, 7, 30, 2.35)",
        "update northwind.order_items set discount = 0.20 where order_id = 1006 and product_id = 2",
        "delete from northwind.order_items where order_id = 1006 and product_id = 4",
    ],
]

NORTHWIND_ROUND_2: list[list[str]] = [
    # the outbox purged as Debezium's outbox users do: silver keeps every event anyway
    ["delete from northwind.cdc_events where event_id <= 12"],
    ["update northwind.orders set ship_country = null, status = 'on hold' where order_id = 1001"],
    # an order id deleted earlier is used again
    [
        "insert into northwind.orders (order_id, customer_id, order_date, status, freight)"
        " values (1005, 2, date '2026-03-12', 'new', 0)",
        "insert into northwind.order_items (order_id, product_id, quantity, unit_price) values (1005, 5, 1, 12.40)",
    ],
    ["delete from northwind.orders where order_id = 1007"],
    ["update northwind.order_items set unit_price = 4.95 where product_id = 1"],
]

# northwind.products, captured by queries (tests/e2e/jdbc_poller.py); a trigger sets updated_at.
PRODUCTS_ROUND_1: list[list[str]] = [
    ["insert into northwind.products (product_id, product_name, unit_price) values (9, 'Lingonberry syrup', 5.45)"],
    ["insert into northwind.products (product_id, product_name, unit_price) values (10, 'Dulse flakes', 3.30)"],
    ["update northwind.products set unit_price = 19.10 where product_id = 2"],
    # twice before the next poll: only the second state is ever published
    ["update northwind.products set product_name = 'Rye crackers, thin' where product_id = 3"],
    ["update northwind.products set unit_price = 3.40 where product_id = 3"],
]

PRODUCTS_ROUND_2: list[list[str]] = [
    # never seen by a query-based source: product 10 stays in silver
    ["delete from northwind.products where product_id = 10"],
    ["update northwind.products set unit_price = 5.95 where product_id = 9"],
]
