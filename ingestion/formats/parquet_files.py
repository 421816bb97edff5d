"""ParquetFormat: Parquet files of Connect's Avro records, written by parquet-avro."""

from __future__ import annotations

import json
import re
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ingestion import avro
from ingestion.errors import SinkFileError
from ingestion.formats.base import SinkFormat, position_columns, read_range

# Parquet codecs Spark 3.5 decodes without extra jars (the S3 sink's parquet.codec also
# offers brotli and lzo).
CODECS = ("UNCOMPRESSED", "SNAPPY", "GZIP", "ZSTD", "LZ4", "LZ4_RAW")
# Parquet files end with the footer's length (4 bytes, little-endian) and this magic.
MAGIC = b"PAR1"
# parquet-avro (the sink's ParquetFormat) keeps the writer's Avro schema in the footer
# under this key. Read with that schema stripped of logical types, its columns come out in
# the encodings JsonConverter writes, decimals as their stored bytes: Spark's own reading
# (as decimals) cannot even read a decimal stored as BINARY with its vectorized reader.
AVRO_SCHEMA_KEY = "parquet.avro.schema"
# How a reader schema says what a file is read with: a Spark schema (JSON), or the
# schema in its footer (Spark's inference; avro.jsonconverter_value renders its types).
SPARK_SCHEMA = "spark:"
FOOTER_SCHEMA = "parquet:"


class ParquetFiles(SinkFormat):
    name = "parquet"
    # The codec's extension comes before `.parquet` (none, `.snappy`, `.gz`, `.zstd`,
    # `.lz4hadoop`, `.br`, `.lzo`); the footer says which codecs Spark must decode.
    extension = r"(?P<codec>\.snappy|\.gz|\.zstd|\.lz4hadoop|\.br|\.lzo)?\.parquet"
    described = "Parquet files (ParquetFormat)"
    shown = "[.<codec>].parquet"
    needs_inspection = True

    def inspect(self, spark: SparkSession, path: Any, name: str, size: int) -> str:
        """SinkFileError if the file is no whole Parquet file or holds what Spark cannot
        read (codecs, TIME columns without the writer's Avro schema)."""
        if size < 12:
            raise SinkFileError(f"{name}: not a Parquet file ({size} bytes, less than its magic and footer)")
        head = read_range(spark, path, 0, 4)
        tail = read_range(spark, path, size - 8, 8)
        if head != MAGIC or tail[4:] != MAGIC:
            raise SinkFileError(f"{name}: not a whole Parquet file: it starts with {head!r} and ends with {tail[4:]!r}, "
                                f"expected {MAGIC!r} at both ends (cut short?)")
        footer_length = int.from_bytes(tail[:4], "little")
        if footer_length + 12 > size:
            raise SinkFileError(f"{name}: cut short or damaged: its footer of {footer_length} bytes is longer than the file")
        jvm = spark._jvm  # type: ignore[attr-defined]
        try:
            footer = jvm.org.apache.parquet.hadoop.ParquetFileReader.readFooter(
                spark._jsc.hadoopConfiguration(), path)  # type: ignore[attr-defined]
        except Exception as exc:  # py4j wraps the reader's exception
            raise SinkFileError(f"{name}: its Parquet footer does not read: {str(exc).splitlines()[0]}") from exc
        codecs = {column.getCodec().name() for block in footer.getBlocks() for column in block.getColumns()}
        unknown = sorted(codecs - set(CODECS))
        if unknown:
            raise SinkFileError(f"{name}: Parquet codec(s) {', '.join(unknown)} that Spark cannot decode "
                                f"(accepted: {', '.join(CODECS)})")
        written_by_avro = footer.getFileMetaData().getKeyValueMetaData().get(AVRO_SCHEMA_KEY)
        if written_by_avro is not None:
            avro_schema = jvm.org.apache.avro.Schema.Parser().parse(avro.without_logical_types(str(written_by_avro)))
            return SPARK_SCHEMA + str(jvm.org.apache.spark.sql.avro.SchemaConverters.toSqlType(avro_schema).dataType().json())
        schema = str(footer.getFileMetaData().getSchema().toString())
        if re.search(r"\(TIME\(", schema):
            raise SinkFileError(f"{name}: a Parquet TIME column without the writer's Avro schema, which Spark 3.5 "
                                "cannot read")
        return FOOTER_SCHEMA + schema

    def read_lines(self, spark: SparkSession, reader_schema: str | None, paths: list[str]) -> DataFrame:
        """Read with the Spark schema `reader_schema` names, else the footer's; dates and
        timestamps taken as written (proleptic Gregorian, as Connect counts days and
        milliseconds from the epoch)."""
        reader = (spark.read.format("parquet").option("datetimeRebaseMode", "CORRECTED")
                  .option("int96RebaseMode", "CORRECTED"))
        if reader_schema is not None and reader_schema.startswith(SPARK_SCHEMA):
            reader = reader.schema(StructType.fromJson(json.loads(reader_schema[len(SPARK_SCHEMA):])))
        records = reader.load(paths)
        return records.select(*position_columns(), avro.jsonconverter_line(records).alias("line"))


def avro_writer_schema(spark: SparkSession, uri: str) -> str | None:
    """The Avro writer schema parquet-avro keeps in a Parquet file's footer, or None."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(uri))
    footer = jvm.org.apache.parquet.hadoop.ParquetFileReader.readFooter(
        spark._jsc.hadoopConfiguration(), path)  # type: ignore[attr-defined]
    found = footer.getFileMetaData().getKeyValueMetaData().get(AVRO_SCHEMA_KEY)
    return None if found is None else str(found)
