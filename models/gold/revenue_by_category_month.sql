with

payments as (
    select * from {{ ref('payment') }}
),

rentals as (
    select * from {{ ref('rental') }}
),

inventory as (
    select * from {{ ref('inventory') }}
),

film_categories as (
    select * from {{ ref('film_category') }}
),

categories as (
    select * from {{ ref('category') }}
),

-- a payment counts for each category of the rented film; a payment whose rental,
-- inventory item or film category is not (or no longer) in silver has no category
payments_with_category as (
    select
        payments.payment_id,
        payments.amount,
        categories.name as category_name,
        trunc(payments.payment_date, 'MM') as payment_month
    from payments
    left join rentals
        on payments.rental_id = rentals.rental_id
    left join inventory
        on rentals.inventory_id = inventory.inventory_id
    left join film_categories
        on inventory.film_id = film_categories.film_id
    left join categories
        on film_categories.category_id = categories.category_id
),

final as (
    select
        category_name,
        payment_month,
        sum(amount) as revenue,
        count(*) as payment_count
    from payments_with_category
    group by category_name, payment_month
)

select * from final
