"""`python -m ingestion ...` (same as the `cdc-ingest` console script)."""

import sys

from ingestion.cli import main

sys.exit(main())
