with

order_documents as (
    select * from {{ ref('order_documents') }}
),

items as (
    select
        order_documents.order_id,
        explode(order_documents.document.items) as item
    from order_documents
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
