-- silver.orders holds one row per key alive at the end of the stream; the generator
-- counts those independently and passes the number in (var bench_live_keys).
{{ config(enabled=var('bench_live_keys', none) is not none) }}

with

counted as (
    select count(*) as row_count from {{ ref('orders') }}
),

final as (
    select row_count, {{ var('bench_live_keys', 0) }} as expected_row_count
    from counted
    where row_count != {{ var('bench_live_keys', 0) }}
)

select * from final
