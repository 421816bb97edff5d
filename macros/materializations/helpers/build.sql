{#- The end of a build, shared by the project's materializations (cdc_incremental,
    cdc_history, hudi_incremental): what a build returns to dbt, and the steps after its
    table is written. -#}


{#- The relations a build returns to dbt, which adds them to its relation cache: the
    state table too, so that a model built later in the same invocation (a
    hudi_incremental gold model) finds it with load_relation. -#}
{% macro cdc_built_relations(target_relation, stored_relation) %}
    {{ return([target_relation] if stored_relation == target_relation else [target_relation, stored_relation]) }}
{% endmacro %}


{#- The last steps of a build (cdc_incremental, cdc_history) once its table is written:
    keep the rejected events (next to the model's relation `target_relation`), record
    the resets (`applied`: the stored table's cdc.resets when the build began, none after
    a full refresh; with `reset_groups`, the groups for the next build's cdc_resets, and
    `applied_groups` as stored) and the watermark on the stored table `stored_relation`,
    drop the batch. The watermark comes last: a build that stops before it reads its
    window again, and merging its groups again changes nothing (each figure is a max).
    `properties`: more table properties to set with the watermark. -#}
{% macro cdc_finish_build(target_relation, stored_relation, batch, primary_key, full_refresh, resets, applied,
        reset_groups=none, applied_groups=none, properties={}) %}
    {%- do cdc_record_rejected(target_relation, batch, primary_key, full_refresh) -%}
    {%- do cdc_write_resets(stored_relation, resets, none if full_refresh else applied, reset_groups,
        none if full_refresh else applied_groups) -%}
    {%- do cdc_write_watermark(stored_relation, batch, properties) -%}
    {%- do cdc_drop_table(batch) -%}
{% endmacro %}


{#- How every build of the project's materializations ends, whether it wrote or had
    nothing to do: `result` as the build's message, the post-hooks, the model's docs on
    the relation when it wrote (`wrote`), the build's lock freed; returns what the
    materialization returns to dbt, `relations` its relation cache takes in. -#}
{% macro cdc_end_build(target_relation, result, relations, wrote=true) %}
    {%- call noop_statement('main', result, 'OK') -%}{%- endcall -%}
    {%- do run_hooks(post_hooks) -%}
    {%- if wrote -%}
        {%- do persist_docs(target_relation, model) -%}
    {%- endif -%}
    {%- do cdc_unlock_build(target_relation) -%}
    {{ return({'relations': relations}) }}
{% endmacro %}
