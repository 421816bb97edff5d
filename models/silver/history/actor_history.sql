with

change_log as (
    select * from {{ source('bronze', 'pagila_public_actor') }}
),

resets as (
    {{ cdc_resets('change_log') }}
),

-- every event, not only new ones: a late event can split or merge stored versions
change_events as (
    {{ cdc_change_events('change_log', 'resets', truncated='keep') }}
),

final as (
    {{ cdc_versions('change_log', 'change_events', 'resets') }}
)

select * from final
