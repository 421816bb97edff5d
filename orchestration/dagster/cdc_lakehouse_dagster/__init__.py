"""The lakehouse as Dagster assets: one ingestion pass lands bronze (`python -m ingestion`
as a process), then dagster-dbt builds the silver and gold models from the project's
manifest, one asset graph bronze -> silver -> gold (docs/how-to/schedule-with-dagster.md).

    dagster dev -m cdc_lakehouse_dagster.definitions -d orchestration/dagster -p 3070
"""
