-- The benchmark times two ways to the same table: any row in one and not the other fails it.
with

silver as (
    select order_id, customer_id, status, amount, order_date, updated_at, note
    from {{ ref('orders') }}
),

reference as (
    select order_id, customer_id, status, amount, order_date, updated_at, note
    from {{ ref('orders_full_recompute') }}
),

only_in_silver as (
    select * from silver
    except all
    select * from reference
),

only_in_reference as (
    select * from reference
    except all
    select * from silver
),

final as (
    select 'silver' as found_only_in, only_in_silver.* from only_in_silver
    union all
    select 'reference' as found_only_in, only_in_reference.* from only_in_reference
)

select * from final
