with

current_state as (
    {{ cdc_current_state(source('bronze', 'pagila_public_customer')) }}
),

-- `active` is GENERATED ALWAYS AS (case when activebool is true then 1 else 0 end) STORED
-- in PostgreSQL. Logical replication before PostgreSQL 18 does not publish generated
-- columns, so streamed events lack it (only the initial snapshot may carry it): it is
-- computed here from activebool exactly as PostgreSQL does (`meta.cdc_derived` in the YAML).
final as (
    select
        *,
        cast(case when activebool is true then 1 else 0 end as int) as active
    from current_state
)

select * from final
