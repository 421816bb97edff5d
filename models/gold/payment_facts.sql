{{ config(materialized='hudi_incremental', file_format='hudi', unique_key='payment_id') }}

with

payments as (
    {{ hudi_incremental_source(ref('payment')) }}
),

final as (
    select
        payments.payment_id,
        payments.customer_id,
        payments.staff_id,
        payments.rental_id,
        payments.amount,
        payments.payment_date,
        trunc(payments.payment_date, 'MM') as payment_month,
        dayofweek(payments.payment_date) in (1, 7) as is_weekend,
        case
            when payments.amount < 2 then 'low'
            when payments.amount < 5 then 'medium'
            else 'high'
        end as amount_band
    from payments
    -- a free rental's zero payment is no revenue fact: an update to zero removes the row
    where payments.amount > 0
)

select * from final
