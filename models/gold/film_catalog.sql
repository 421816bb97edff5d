with

films as (
    select * from {{ ref('film') }}
),

languages as (
    select * from {{ ref('language') }}
),

film_categories as (
    select * from {{ ref('film_category') }}
),

categories as (
    select * from {{ ref('category') }}
),

film_actors as (
    select * from {{ ref('film_actor') }}
),

category_names_per_film as (
    select
        film_categories.film_id,
        array_sort(collect_list(categories.name)) as category_names
    from film_categories
    inner join categories
        on film_categories.category_id = categories.category_id
    group by film_categories.film_id
),

actor_counts as (
    select
        film_id,
        count(*) as actor_count
    from film_actors
    group by film_id
),

final as (
    select
        films.film_id,
        films.title,
        films.release_year,
        films.rating,
        films.rental_rate,
        films.replacement_cost,
        films.length,
        -- char(20) in the source: Postgres pads it
        trim(languages.name) as language_name,
        trim(original_languages.name) as original_language_name,
        coalesce(category_names_per_film.category_names, array()) as category_names,
        coalesce(actor_counts.actor_count, 0) as actor_count
    from films
    left join languages
        on films.language_id = languages.language_id
    left join languages as original_languages
        on films.original_language_id = original_languages.language_id
    left join category_names_per_film
        on films.film_id = category_names_per_film.film_id
    left join actor_counts
        on films.film_id = actor_counts.film_id
)

select * from final
