"""Exception types of `python -m verify`; each message names what is wrong and where."""

from __future__ import annotations


class VerifyError(RuntimeError):
    """The comparison cannot be made or finished (exit code 1)."""


class UsageError(VerifyError):
    """The command line asks for something impossible (exit code 2)."""


class ProjectError(VerifyError):
    """The dbt project's YAML cannot say what a silver table holds or where it comes from."""


class IdentifierError(VerifyError):
    """A name from the project or from the data is not a plain identifier, so it never reaches SQL."""


class SourceError(VerifyError):
    """The source database cannot be reached or queried."""


class SilverError(VerifyError):
    """Silver (or the bronze table it reads) cannot be queried."""
