with

change_log as (
    select * from {{ source('bronze', 'pagila_public_payment') }}
    where {{ cdc_new_commits() }}
),

change_events as (
    {{ cdc_change_events('change_log') }}
),

final as (
    {{ cdc_latest_per_key('change_events') }}
)

select * from final
