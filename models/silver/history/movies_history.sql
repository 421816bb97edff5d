with

versions as (
    {{ cdc_history_versions(source('bronze', 'mariadb_movies_db_movies')) }}
),

final as (
    select * from versions
)

select * from final
