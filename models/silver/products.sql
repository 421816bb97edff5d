with

change_log as (
    select * from {{ source('bronze', 'query_northwind_products') }}
),

new_changes as (
    select * from change_log
    where {{ cdc_new_commits() }}
),

resets as (
    {{ cdc_resets('change_log') }}
),

change_events as (
    {{ cdc_change_events('new_changes', 'resets') }}
),

final as (
    {{ cdc_latest_per_key('change_events', 'resets') }}
)

select * from final
