with

change_log as (
    select * from {{ source('bronze', 'bench_public_orders') }}
),

resets as (
    {{ cdc_resets('change_log') }}
),

change_events as (
    {{ cdc_change_events('change_log', 'resets') }}
),

ranked as (
    select
        *,
        row_number() over (partition by order_id order by _cdc_order desc) as _rank
    from change_events
),

final as (
    select
        order_id,
        customer_id,
        status,
        amount,
        order_date,
        updated_at,
        note
    from ranked
    where _rank = 1 and not _cdc_deleted
)

select * from final
