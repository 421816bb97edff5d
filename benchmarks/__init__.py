"""Benchmarks: `make bench` (see benchmarks/README.md). Not tests."""
