"""Land Debezium change events from Kafka Connect S3-sink files into bronze Apache Hudi tables."""
