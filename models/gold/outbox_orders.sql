with

order_outbox as (
    select * from {{ ref('order_outbox') }}
),

documents as (
    select
        order_outbox.order_id,
        order_outbox.customer_id,
        order_outbox.order_date,
        order_outbox.status,
        order_outbox.ship_country,
        order_outbox.freight,
        order_outbox.updated_at,
        -- every field as its JSON text; cast explicitly below
        from_json(
            order_outbox.customer, 'struct<customer_id:string, company_name:string, country:string>'
        ) as customer_document,
        json_array_length(order_outbox.items) as item_count
    from order_outbox
),

final as (
    select
        documents.order_id,
        documents.customer_id,
        documents.order_date,
        documents.status,
        documents.ship_country,
        documents.freight,
        cast(documents.customer_document.company_name as string) as customer_name,
        cast(documents.customer_document.country as string) as customer_country,
        documents.item_count,
        documents.updated_at
    from documents
)

select * from final
