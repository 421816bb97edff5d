with

addresses as (
    select * from {{ ref('address') }}
),

cities as (
    select * from {{ ref('city') }}
),

countries as (
    select * from {{ ref('country') }}
),

final as (
    select
        addresses.address_id,
        addresses.address,
        addresses.address2,
        addresses.district,
        addresses.postal_code,
        addresses.phone,
        cities.city_id,
        cities.city,
        countries.country_id,
        countries.country
    from addresses
    left join cities
        on addresses.city_id = cities.city_id
    left join countries
        on cities.country_id = countries.country_id
)

select * from final
