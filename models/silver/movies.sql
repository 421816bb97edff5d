with

current_state as (
    {{ cdc_current_state(source('bronze', 'mariadb_movies_db_movies')) }}
),

final as (
    select * from current_state
)

select * from final
