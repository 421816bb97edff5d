with

current_state as (
    {{ cdc_current_state(source('bronze', 'query_northwind_products')) }}
),

final as (
    select * from current_state
)

select * from final
