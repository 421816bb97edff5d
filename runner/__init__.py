"""Scheduled runs: one ingestion pass plus `dbt build`, once (cron) or in a loop."""
