"""The S3 sink's file formats, each one module behind formats.base.SinkFormat.

A new format is a module with its SinkFormat and a line in FORMATS: the file name
pattern, the listing, the reading and the run's bookkeeping ask the format, never its name.
"""

from __future__ import annotations

from ingestion.formats.avro_files import AvroFiles
from ingestion.formats.base import SinkFormat
from ingestion.formats.json_lines import JsonLines
from ingestion.formats.parquet_files import ParquetFiles

FORMATS: tuple[SinkFormat, ...] = (JsonLines(), AvroFiles(), ParquetFiles())
BY_NAME = {f.name: f for f in FORMATS}
JSON = JsonLines.name
AVRO = AvroFiles.name
PARQUET = ParquetFiles.name


def get(name: str) -> SinkFormat:
    """The format named `name` (SourceFile.format)."""
    return BY_NAME[name]


def extension_pattern() -> str:
    """A regular expression for the end of a values file's name, a named group per format
    (its name), inside a group `extension`."""
    return "(?P<extension>" + "|".join(f"(?P<{f.name}>{f.extension})" for f in FORMATS) + ")"


def accepted() -> str:
    """The formats, as the list of accepted inputs names them."""
    return ", ".join(f.described for f in FORMATS[:-1]) + " or " + FORMATS[-1].described


def file_name_pattern() -> str:
    """A values file's name, as errors show it."""
    first, *others = FORMATS
    return f"<topic>+<partition>+<startOffset>{first.shown} (or {', '.join(f.shown for f in others)})"
