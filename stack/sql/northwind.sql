-- A small Northwind-like order schema written for this project, with two outbox tables
-- that triggers fill on every change of an order or of its items: `cdc_events`, an event
-- log (one row per event, carrying the order's full state after the change), and
-- `order_outbox`, the current document per order (one row per order, updated in place,
-- deleted with the order). Run once, in one transaction.

create schema northwind;

create table northwind.customers (
    customer_id integer primary key,
    company_name text not null,
    country text not null
);

-- Read by query-based capture (a JDBC-style source in timestamp mode): `updated_at` is
-- set on every insert and update, which is all such a source can see.
create table northwind.products (
    product_id integer primary key,
    product_name text not null,
    unit_price numeric(10, 2) not null,
    updated_at timestamptz not null default clock_timestamp()
);

create function northwind.touch_updated_at() returns trigger
language plpgsql as $$
begin
    new.updated_at := clock_timestamp();
    return new;
end;
$$;

create trigger products_touch before update on northwind.products
    for each row execute function northwind.touch_updated_at();

create table northwind.orders (
    order_id integer primary key,
    customer_id integer not null references northwind.customers (customer_id),
    order_date date not null,
    status text not null,
    ship_country text,
    freight numeric(10, 2) not null default 0
);

create table northwind.order_items (
    order_id integer not null references northwind.orders (order_id) on delete cascade,
    product_id integer not null references northwind.products (product_id),
    quantity integer not null check (quantity > 0),
    unit_price numeric(10, 2) not null,
    discount numeric(4, 2) not null default 0,
    primary key (order_id, product_id)
);

create table northwind.cdc_events (
    event_id bigserial primary key,
    aggregate_type text not null,
    aggregate_id text not null,
    event_type text not null,
    payload jsonb not null,
    created_at timestamptz not null default clock_timestamp()
);

-- The current document per order: the order's columns, its items and its customer as
-- they were at the order's last change (a customer's later change does not reach it).
create table northwind.order_outbox (
    order_id integer primary key,
    customer_id integer not null,
    order_date date not null,
    status text not null,
    ship_country text,
    freight numeric(10, 2) not null,
    items jsonb not null,
    customer jsonb not null,
    updated_at timestamptz not null
);

-- The order as one JSON document: its columns and its items (sorted by product).
create function northwind.order_document(p_order_id integer) returns jsonb
language sql stable as $$
    select jsonb_build_object(
        'order_id', o.order_id,
        'customer_id', o.customer_id,
        'order_date', o.order_date,
        'status', o.status,
        'ship_country', o.ship_country,
        'freight', o.freight,
        'items', coalesce((
            select jsonb_agg(jsonb_build_object(
                'product_id', i.product_id,
                'quantity', i.quantity,
                'unit_price', i.unit_price,
                'discount', i.discount) order by i.product_id)
            from northwind.order_items as i
            where i.order_id = o.order_id), '[]'::jsonb))
    from northwind.orders as o
    where o.order_id = p_order_id
$$;

-- Makes the order's row in order_outbox match the order: written with `p_items` (its
-- document's items), or deleted when the order is gone.
create function northwind.write_order_document(p_order_id integer, p_items jsonb) returns void
language plpgsql as $$
begin
    insert into northwind.order_outbox as d (
        order_id, customer_id, order_date, status, ship_country, freight, items, customer, updated_at
    )
    select
        o.order_id,
        o.customer_id,
        o.order_date,
        o.status,
        o.ship_country,
        o.freight,
        p_items,
        jsonb_build_object('customer_id', c.customer_id, 'company_name', c.company_name, 'country', c.country),
        clock_timestamp()
    from northwind.orders as o
    inner join northwind.customers as c on o.customer_id = c.customer_id
    where o.order_id = p_order_id
    on conflict (order_id) do update set
        customer_id = excluded.customer_id,
        order_date = excluded.order_date,
        status = excluded.status,
        ship_country = excluded.ship_country,
        freight = excluded.freight,
        items = excluded.items,
        customer = excluded.customer,
        updated_at = excluded.updated_at;
    if not found then
        delete from northwind.order_outbox where order_id = p_order_id;
    end if;
end;
$$;

create function northwind.write_order_event(p_order_id integer, p_event_type text) returns void
language plpgsql as $$
declare
    document jsonb;
begin
    -- the order's state now (null once it is gone), read once for both outboxes
    document := northwind.order_document(p_order_id);
    perform northwind.write_order_document(p_order_id, document -> 'items');
    if p_event_type = 'order_deleted' then
        -- the order is gone: the event carries its key only
        document := jsonb_build_object('order_id', p_order_id);
    elsif document is null then
        -- an item change caused by the order's own delete (cascade): the delete event says it
        return;
    end if;
    insert into northwind.cdc_events (aggregate_type, aggregate_id, event_type, payload)
    values ('order', p_order_id::text, p_event_type, document);
end;
$$;

create function northwind.orders_outbox() returns trigger
language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        perform northwind.write_order_event(new.order_id, 'order_created');
    elsif tg_op = 'UPDATE' then
        -- a changed order id is the old order's end and a new order's start
        if new.order_id <> old.order_id then
            perform northwind.write_order_event(old.order_id, 'order_deleted');
            perform northwind.write_order_event(new.order_id, 'order_created');
        else
            perform northwind.write_order_event(new.order_id, 'order_updated');
        end if;
    else
        perform northwind.write_order_event(old.order_id, 'order_deleted');
    end if;
    return null;
end;
$$;

create function northwind.order_items_outbox() returns trigger
language plpgsql as $$
begin
    if tg_op in ('UPDATE', 'DELETE') then
        perform northwind.write_order_event(old.order_id, 'order_updated');
    end if;
    if tg_op = 'INSERT' or (tg_op = 'UPDATE' and new.order_id <> old.order_id) then
        perform northwind.write_order_event(new.order_id, 'order_updated');
    end if;
    return null;
end;
$$;

create trigger orders_outbox after insert or update or delete on northwind.orders
    for each row execute function northwind.orders_outbox();
create trigger order_items_outbox after insert or update or delete on northwind.order_items
    for each row execute function northwind.order_items_outbox();

-- Invented rows.
insert into northwind.customers (customer_id, company_name, country) values
    (1, 'Alder Trading', 'Norway'),
    (2, 'Birchwood Foods', 'Canada'),
    (3, 'Cedar Market', 'Chile'),
    (4, 'Dune Grocers', 'Morocco'),
    (5, 'Elm Street Deli', 'Ireland'),
    (6, 'Fjord Provisions', 'Iceland');

insert into northwind.products (product_id, product_name, unit_price) values
    (1, 'Barley tea', 4.50),
    (2, 'Smoked trout', 18.25),
    (3, 'Rye crackers', 3.10),
    (4, 'Cloudberry jam', 9.95),
    (5, 'Goat cheese', 12.40),
    (6, 'Pickled herring', 7.80),
    (7, 'Oat biscuits', 2.35),
    (8, 'Sea buckthorn juice', 6.60);

insert into northwind.orders (order_id, customer_id, order_date, status, ship_country, freight) values
    (1001, 1, '2026-03-02', 'shipped', 'Norway', 12.50),
    (1002, 2, '2026-03-03', 'shipped', 'Canada', 30.00),
    (1003, 3, '2026-03-05', 'packed', 'Chile', 41.75),
    (1004, 4, '2026-03-06', 'new', null, 0),
    (1005, 5, '2026-03-08', 'new', 'Ireland', 8.20),
    (1006, 1, '2026-03-09', 'packed', 'Norway', 15.00);

insert into northwind.order_items (order_id, product_id, quantity, unit_price, discount) values
    (1001, 1, 10, 4.50, 0),
    (1001, 4, 2, 9.95, 0.05),
    (1002, 2, 5, 18.25, 0),
    (1002, 3, 20, 3.10, 0.10),
    (1002, 7, 12, 2.35, 0),
    (1003, 5, 3, 12.40, 0),
    (1004, 6, 8, 7.80, 0.15),
    (1004, 8, 6, 6.60, 0),
    (1005, 1, 4, 4.50, 0),
    (1006, 2, 1, 18.25, 0),
    (1006, 4, 3, 9.95, 0);
