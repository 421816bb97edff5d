"""Onboarding: scaffold the bronze source, silver model and typed YAML of Debezium topics."""
