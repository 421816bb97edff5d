"""Exception types of the ingestion; each message names what is wrong and where."""

from __future__ import annotations


class IngestionError(RuntimeError):
    """A run cannot proceed (exit code 1)."""


class UsageError(IngestionError):
    """The command line asks for something impossible (exit code 2)."""


class InputNotFoundError(IngestionError):
    """The `--input` folder or URI does not exist."""


class SourcesFileError(IngestionError):
    """The dbt sources YAML exists but cannot be understood."""


class SinkFileError(ValueError):
    """A sink file cannot be read as its name says (not Avro, cut short, ...); its message
    names the file and what was found. The file is quarantined whole."""


class SchemaRegistryError(IngestionError):
    """A schema the records name cannot be had from the registry (unknown id, registry
    unreachable, refused credentials); the run stops before writing the micro-batch."""


class UnknownSchemaError(SchemaRegistryError):
    """The registry answers that it has no schema with this id."""


class RegistryUnavailableError(SchemaRegistryError):
    """The registry did not answer, or kept answering with a transient error."""
