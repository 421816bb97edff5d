{#- Builds of one model in several processes (a metastore they share,
    docs/how-to/share-the-metastore.md).

    A build rebuilds a table by dropping and creating it, and writes work tables of fixed
    names, so two builds of one model at once would destroy each other's work (a refused
    CREATE TABLE AS SELECT of Hudi's even deletes the folder of the table the other
    created). Where processes share the catalog (not cdc_single_process), each build of
    a table-writing materialization therefore holds the model's build lock first: it
    creates its own catalog entry `<model>__cdc_lock_<build id>` and holds the lock once
    its entry is the model's only one (docs/decisions/concurrent-builds.md). A second
    build waits up to `cdc_build_lock_wait_seconds` (var, 0) and then stops, naming the
    holder. -#}


{#- This build's id: when it started (UTC, to the second, so that a lock entry's age can
    be read from its name) and the invocation id's first 8 digits. -#}
{% macro cdc_build_id() %}
    {{ return(run_started_at.strftime('%Y%m%d%H%M%S') ~ '_' ~ invocation_id.replace('-', '')[:8]) }}
{% endmacro %}


{#- This build's lock entry for `target_relation`'s model. -#}
{% macro cdc_lock_relation(target_relation) %}
    {{ return(target_relation.incorporate(type='table',
        path={'identifier': target_relation.identifier ~ '__cdc_lock_' ~ cdc_build_id()})) }}
{% endmacro %}


{#- The build ids of the model's other lock entries, sorted. An entry whose build began
    over `cdc_build_lock_max_age_hours` (var, 24) ago is a killed build's: it is dropped. -#}
{% macro cdc_other_lock_holders(target_relation) %}
    {%- set own = cdc_build_id() -%}
    {%- set oldest = (run_started_at - modules.datetime.timedelta(
        hours=var('cdc_build_lock_max_age_hours', 24) | float)).strftime('%Y%m%d%H%M%S') -%}
    {%- set pattern = '^' ~ modules.re.escape(target_relation.identifier | lower) ~ '__cdc_lock_([0-9]{14}_[0-9a-f]{8})$' -%}
    {%- set holders = [] -%}
    {%- for row in run_query("show tables in " ~ target_relation.schema ~ " like '"
            ~ target_relation.identifier ~ "__cdc_lock_*'") -%}
        {%- set found = modules.re.match(pattern, row['tableName'] | lower) -%}
        {%- if found and found.group(1) != own -%}
            {%- if found.group(1)[:14] < oldest -%}
                {{ log("WARNING " ~ model.name ~ ": dropping the build lock " ~ target_relation.schema ~ "."
                    ~ row['tableName'] ~ " of build " ~ found.group(1) ~ ", which began over "
                    ~ var('cdc_build_lock_max_age_hours', 24) ~ " hours ago (a killed build).", info=true) }}
                {%- do cdc_drop_table(target_relation.incorporate(type='table',
                    path={'identifier': row['tableName']})) -%}
            {%- else -%}
                {%- do holders.append(found.group(1)) -%}
            {%- endif -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(holders | sort) }}
{% endmacro %}


{#- Takes the model's build lock, or stops the build; nothing to take where this process
    is the catalog's only one (cdc_single_process). The build creates its own entry
    (never refused: the name is its own) and lists the model's entries: it holds the
    lock when its entry is the only one. Every build creates before it lists, so two
    cannot both see only their own. When there are others, the build whose id sorts
    first keeps its entry for up to 10 s while the others withdraw theirs (two builds
    starting together: one goes on); any other withdraws its entry, then waits for up
    to `cdc_build_lock_wait_seconds` (var, 0), trying again every 5 s, and stops. -#}
{% macro cdc_lock_build(target_relation) %}
    {%- if cdc_single_process() -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set own = cdc_lock_relation(target_relation) -%}
    {%- set wait_seconds = var('cdc_build_lock_wait_seconds', 0) | int -%}
    {%- set state = namespace(held=false, done=false, waited=0, first_tries=0, others=[]) -%}
    {%- for attempt in range(wait_seconds // 5 + 12) if not state.done -%}
        {%- call statement('cdc_lock') -%}
            create table if not exists {{ own }} (build string) using parquet
        {%- endcall -%}
        {%- set state.others = cdc_other_lock_holders(target_relation) -%}
        {%- if state.others | length == 0 -%}
            {%- set state.held = true -%}
            {%- set state.done = true -%}
        {%- elif cdc_build_id() < state.others[0] and state.first_tries < 10 -%}
            {%- if state.first_tries == 0 -%}
                {{ log(model.name ~ ": waiting for build " ~ state.others | join(', ')
                    ~ " of another dbt invocation to withdraw or end (up to 10 s).", info=true) }}
            {%- endif -%}
            {%- set state.first_tries = state.first_tries + 1 -%}
            {%- do cdc_sleep(1) -%}
        {%- else -%}
            {%- do cdc_drop_table(own) -%}
            {%- if state.waited < wait_seconds -%}
                {%- if state.waited == 0 -%}
                    {{ log(model.name ~ ": waiting for build " ~ state.others | join(', ')
                        ~ " of another dbt invocation to end (up to " ~ wait_seconds ~ " s).", info=true) }}
                {%- endif -%}
                {%- do cdc_sleep(5) -%}
                {%- set state.waited = state.waited + 5 -%}
            {%- else -%}
                {%- set state.done = true -%}
            {%- endif -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if not state.held -%}
        {%- do cdc_drop_table(own) -%}
        {%- set example = target_relation.schema ~ '.' ~ target_relation.identifier ~ '__cdc_lock_'
            ~ state.others[0] -%}
        {{ exceptions.raise_compiler_error(
            "Model " ~ model.name ~ " is being built by another dbt invocation (build " ~ state.others | join(', ')
            ~ ", the first 14 digits its start in UTC): this build stops so that the two do not write its "
            ~ "tables at once. Run it again when that one ends (dbt retry), or let builds wait for each other: "
            ~ "--vars '{cdc_build_lock_wait_seconds: 600}'. If no build of " ~ model.name ~ " is running (a "
            ~ "killed process), drop its lock: drop table " ~ example) }}
    {%- endif -%}
{% endmacro %}


{#- Sleeps in the Spark driver: Jinja cannot. -#}
{% macro cdc_sleep(seconds) %}
    {%- do run_query("select reflect('java.lang.Thread', 'sleep', " ~ (seconds * 1000) | int ~ "L)") -%}
{% endmacro %}


{#- Releases the model's build lock at the end of a build (or, on-run-end, of a failed
    one): drops this build's entry. -#}
{% macro cdc_unlock_build(target_relation) %}
    {%- if not cdc_single_process() -%}
        {%- do cdc_drop_table(cdc_lock_relation(target_relation)) -%}
    {%- endif -%}
{% endmacro %}


{#- on-run-end (dbt_project.yml): the locks of this invocation's models that failed,
    which stopped before releasing them. A killed process runs no hook: its entries are
    dropped once they are old (cdc_other_lock_holders). -#}
{% macro cdc_unlock_failed_builds(results) %}
    {%- for result in results if result.status == 'error' and result.node.resource_type == 'model'
            and result.node.config.materialized in ['cdc_incremental', 'cdc_history', 'hudi_incremental'] -%}
        {%- do cdc_unlock_build(api.Relation.create(schema=result.node.schema,
            identifier=result.node.alias or result.node.name)) -%}
    {%- endfor -%}
{% endmacro %}


{#- True when no other process can open this lakehouse's catalog at the same time: an
    embedded Spark session on the embedded Derby metastore, which the `local` target
    says with `spark.cdc.metastore` (profiles/profiles.yml). Read from the session, not
    from dbt's `target`, which does not carry the connection method; a Thrift Server's
    sessions say `shared` or nothing. -#}
{% macro cdc_single_process() %}
    {%- set found = run_query('set spark.cdc.metastore') -%}
    {{ return(found.rows | length > 0 and found.rows[0][1] == 'embedded') }}
{% endmacro %}


{#- Where processes share the catalog (not cdc_single_process), a merge-on-read table is
    not compacted by the build that writes it: with two writers (a build, the runner's
    table services, a job of your own), one's inline compaction can try to run the
    compaction the other is running and fail a statement whose data already committed
    (HoodieLockException). The runner's table services compact instead
    (`python -m runner --table-services`). Set for this session, every model alike. -#}
{% macro cdc_compaction_for_concurrent_builds() %}
    {%- if not cdc_single_process() -%}
        {%- call statement('cdc_no_inline_compaction') -%}
            set hoodie.compact.inline=false
        {%- endcall -%}
    {%- endif -%}
{% endmacro %}


{#- Work tables: parquet tables `<model>__<prefix>_<suffix>` next to a model's table
    holding a step's rows, written once so that every later step of the build reads the
    same rows (cdc_incremental's batch, cdc_history's actions, hudi_incremental's window
    and changes); a leftover of a stopped build is replaced. Not CACHE TABLE: Hudi's
    column-stats data skipping unpersists a dataset of its own, which deadlocks with a
    cache being built in another thread or session (dbt threads > 1, a Thrift Server). -#}
{% macro cdc_create_work_table(target_relation, suffix, sql, prefix='cdc') %}
    {%- set relation = cdc_work_relation(target_relation, suffix, prefix) -%}
    {%- do cdc_drop_table(relation) -%}
    {%- call statement(prefix ~ '_create_' ~ suffix) -%}
        create table {{ relation }}
        using parquet
        as {{ sql }}
    {%- endcall -%}
    {{ return(relation) }}
{% endmacro %}


{% macro cdc_work_relation(target_relation, suffix, prefix='cdc') %}
    {{ return(target_relation.incorporate(type='table',
        path={'identifier': target_relation.identifier ~ '__' ~ prefix ~ '_' ~ suffix})) }}
{% endmacro %}


{% macro cdc_drop_table(relation) %}
    {%- call statement('cdc_drop_' ~ relation.identifier) -%}
        drop table if exists {{ relation }} purge
    {%- endcall -%}
{% endmacro %}
