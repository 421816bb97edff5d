"""The exit codes of every command (`python -m ingestion`, `runner`, `verify`, `status`,
`onboarding`): one meaning per number, so a scheduler reads them the same way whichever
command it runs (docs/reference/runner-report.md)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1  # nothing after the failing step was written; a rerun is safe
EXIT_USAGE = 2  # the command line asks for something impossible
EXIT_QUARANTINED = 3  # the run passed and quarantined records (each with its reason)
EXIT_LOCKED = 4  # another run holds the lakehouse's lock
EXIT_DIFFERENT = 5  # verify: silver differs from the source
EXIT_BEHIND = 6  # verify: silver is behind the source
EXIT_STALE = 7  # runner --freshness: a bronze source is past its error threshold
