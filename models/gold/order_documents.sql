{{ config(materialized='ephemeral') }}

with

events as (
    select * from {{ ref('cdc_events') }}
),

order_events as (
    select
        cast(aggregate_id as int) as order_id,
        event_id,
        event_type,
        payload,
        created_at,
        -- events of one snapshot share a log position: the outbox's own sequence orders them
        struct({{ cdc_source_position('_cdc_order') }} as log_position, event_id) as event_position
    from events
    where aggregate_type = 'order'
),

latest_events as (
    select
        order_id,
        max_by(event_id, event_position) as event_id,
        max_by(event_type, event_position) as event_type,
        max_by(payload, event_position) as payload,
        max_by(created_at, event_position) as created_at
    from order_events
    group by order_id
),

final as (
    select
        order_id,
        event_id as last_event_id,
        created_at as last_event_at,
        -- every field as its JSON text; the facts cast each one explicitly
        from_json(
            payload,
            'struct<order_id:string, customer_id:string, order_date:string, status:string, '
            || 'ship_country:string, freight:string, '
            || 'items:array<struct<product_id:string, quantity:string, unit_price:string, discount:string>>>'
        ) as document
    from latest_events
    -- a delete event ends the order: it and its items leave gold
    where event_type != 'order_deleted'
)

select * from final
