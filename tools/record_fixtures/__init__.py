"""Record real Debezium output as test fixtures: ``python -m tools.record_fixtures --out tests/fixtures/debezium``."""
