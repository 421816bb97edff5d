with

order_outbox as (
    select * from {{ ref('order_outbox') }}
),

items as (
    select
        order_outbox.order_id,
        -- every field as its JSON text; cast explicitly below
        explode(
            from_json(
                order_outbox.items,
                'array<struct<product_id:string, quantity:string, unit_price:string, discount:string>>'
            )
        ) as item
    from order_outbox
),

final as (
    select
        items.order_id,
        cast(items.item.product_id as int) as product_id,
        cast(items.item.quantity as int) as quantity,
        cast(items.item.unit_price as decimal(10, 2)) as unit_price,
        cast(items.item.discount as decimal(4, 2)) as discount
    from items
)

select * from final
