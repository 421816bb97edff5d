with

order_documents as (
    select * from {{ ref('order_documents') }}
),

final as (
    select
        order_documents.order_id,
        cast(order_documents.document.customer_id as int) as customer_id,
        cast(order_documents.document.order_date as date) as order_date,
        cast(order_documents.document.status as string) as status,
        cast(order_documents.document.ship_country as string) as ship_country,
        cast(order_documents.document.freight as decimal(10, 2)) as freight,
        cast(size(order_documents.document.items) as int) as item_count,
        order_documents.last_event_id,
        order_documents.last_event_at
    from order_documents
)

select * from final
