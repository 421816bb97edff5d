with

current_state as (
    {{ cdc_current_state(source('bronze', 'outbox_northwind_order_outbox')) }}
),

final as (
    select * from current_state
)

select * from final
