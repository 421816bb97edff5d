with

versions as (
    {{ cdc_history_versions(source('bronze', 'pagila_public_actor')) }}
),

final as (
    select * from versions
)

select * from final
