"""`python -m verify`: is silver in sync with the source databases?

Per silver table: row counts on both sides, then a hashed comparison by key range that
narrows down to the keys that differ and names them and their columns, with the source
read in one snapshot transaction and its log position compared with the highest one
silver has reached (docs/how-to/verify-the-lake.md, docs/decisions/verify-reconciliation.md).
"""
