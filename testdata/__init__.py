"""Writers of what Debezium and the Kafka Connect S3 sink write, for the sample data
(`tools/sample_data`), the benchmark's stream generator (`benchmarks/generator`) and the
tests: Debezium's record builders and value encodings, Kafka's key hashing
(`debezium.py`), sink files in JSON, Avro and Parquet (`sink_formats.py`)."""
