with

current_state as (
    {{ cdc_current_state(source('bronze', 'bench_public_orders')) }}
),

final as (
    select * from current_state
)

select * from final
