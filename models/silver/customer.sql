with

change_log as (
    select * from {{ source('bronze', 'pagila_public_customer') }}
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

-- `active` is GENERATED ALWAYS AS (case when activebool is true then 1 else 0 end) STORED
-- in PostgreSQL. Logical replication before PostgreSQL 18 does not publish generated
-- columns, so streamed events lack it (only the initial snapshot may carry it): it is
-- computed here from activebool exactly as PostgreSQL does (`meta.cdc_derived` in the YAML).
final as (
    select
        *,
        cast(case when activebool is true then 1 else 0 end as int) as active
    from latest_per_key
)

select * from final
