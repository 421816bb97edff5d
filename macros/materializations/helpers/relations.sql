{#- The relations a silver model keeps beside its own. -#}


{#- The state table behind a hard-delete model's view: the latest event of every key,
    deleted keys included (flagged `_cdc_deleted`). -#}
{% macro cdc_state_relation(target_relation) %}
    {{ return(target_relation.incorporate(type='table',
        path={'identifier': target_relation.identifier ~ '__cdc_state'})) }}
{% endmacro %}


{#- The tombstone table of the layout before the state table: dropped when a model is
    rebuilt. -#}
{% macro cdc_tombstone_relation(target_relation) %}
    {{ return(target_relation.incorporate(type='table',
        path={'identifier': target_relation.identifier ~ '__cdc_tombstones'})) }}
{% endmacro %}
