with

change_log as (
    select * from {{ source('bronze', 'pagila_public_film') }}
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

latest_per_key as (
    {{ cdc_latest_per_key('change_events', 'resets') }}
),

-- `revenue_projection` is a generated column PostgreSQL does not replicate (see
-- customer.sql): computed here exactly as its definition says
final as (
    select
        *,
        cast(rental_duration * rental_rate as decimal(5, 2)) as revenue_projection
    from latest_per_key
)

select * from final
