with

change_log as (
    select * from {{ source('bronze', 'pagila_public_film') }}
    where {{ cdc_new_commits() }}
),

change_events as (
    {{ cdc_change_events('change_log') }}
),

latest_per_key as (
    {{ cdc_latest_per_key('change_events') }}
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
