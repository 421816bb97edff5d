"""`python -m status`: per silver table, where it stands (docs/reference/status.md)."""
