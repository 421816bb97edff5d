with

current_state as (
    {{ cdc_current_state(source('bronze', 'pagila_public_film')) }}
),

-- `revenue_projection` is a generated column PostgreSQL does not replicate (see
-- customer.sql): computed here exactly as its definition says
final as (
    select
        *,
        cast(rental_duration * rental_rate as decimal(5, 2)) as revenue_projection
    from current_state
)

select * from final
