with

current_state as (
    {{ cdc_current_state(source('bronze', 'pagila_public_category')) }}
),

final as (
    select * from current_state
)

select * from final
