"""The code location: bronze (one ingestion pass), the dbt models (dagster-dbt, from the
project's manifest), a job and a schedule per run of selectors.yml.

    dagster dev -m cdc_lakehouse_dagster.definitions -d orchestration/dagster -p 3070

Never call dagster-dbt's `fetch_row_counts()` / `fetch_column_metadata()` here: they open
a Spark session in this process, a second one on the `local` target's Derby metastore.
"""

import json
from collections.abc import Iterator, Mapping
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetSelection,
    DefaultScheduleStatus,
    Definitions,
    ScheduleDefinition,
    define_asset_job,
    in_process_executor,
)
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, DbtProject, build_dbt_asset_selection, dbt_assets

from cdc_lakehouse_dagster.bronze import IngestionResource, build_bronze_assets
from cdc_lakehouse_dagster.settings import SPARK_POOL, dbt_executable, dbt_project, lakehouse_lock, prepare_manifest

# A scheduled build leaves dbt's unit tests out, as `python -m runner` does: they check the
# models' SQL, not the data, and CI runs them.
DBT_BUILD = ["build", "--exclude-resource-type", "unit_test"]
SILVER_CRON = "*/15 * * * *"
GOLD_CRON = "0 2 * * *"


class LakehouseTranslator(DagsterDbtTranslator):
    """dagster-dbt's keys (bronze/<source table>, silver/<model>, gold/<model>, seeds/<seed>),
    each asset grouped by its layer, the first part of its key."""

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return self.get_asset_key(dbt_resource_props).path[0]


def build_definitions(project: DbtProject | None = None) -> Definitions:
    project = project or dbt_project()
    manifest = json.loads(prepare_manifest(project).read_text())
    translator = LakehouseTranslator()
    bronze = build_bronze_assets(manifest, translator)

    @dbt_assets(manifest=manifest, project=project, dagster_dbt_translator=translator, pool=SPARK_POOL)
    def cdc_lakehouse_dbt(context: AssetExecutionContext, dbt: DbtCliResource) -> Iterator[Any]:
        # `stream()` raises when dbt fails (a model or a test), which fails the step and the run
        with lakehouse_lock():
            yield from dbt.cli(DBT_BUILD, context=context).stream()

    silver = AssetSelection.assets(bronze) | build_dbt_asset_selection([cdc_lakehouse_dbt], dbt_selector="silver")
    gold = build_dbt_asset_selection([cdc_lakehouse_dbt], dbt_selector="gold_nightly")
    silver_job = define_asset_job("cdc_silver", selection=silver,
                                  description="Land new change events, then `dbt build --selector silver`.")
    gold_job = define_asset_job("cdc_gold_nightly", selection=gold,
                                description="`dbt build --selector gold_nightly`: gold from silver as it stands.")
    return Definitions(
        assets=[bronze, cdc_lakehouse_dbt],
        # steps of a run one after the other in one process: never two Spark processes at once,
        # even for a selection whose steps do not depend on each other
        executor=in_process_executor,
        jobs=[silver_job, gold_job],
        schedules=[
            ScheduleDefinition(job=silver_job, cron_schedule=SILVER_CRON, execution_timezone="UTC",
                               default_status=DefaultScheduleStatus.STOPPED),
            ScheduleDefinition(job=gold_job, cron_schedule=GOLD_CRON, execution_timezone="UTC",
                               default_status=DefaultScheduleStatus.STOPPED),
        ],
        resources={
            "dbt": DbtCliResource(project_dir=project, dbt_executable=dbt_executable()),
            "ingestion": IngestionResource.from_env(),
        },
    )


defs = build_definitions()
