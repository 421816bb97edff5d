"""How stack.connector_problem reads a connector refused by the schema registry: the
subject from the task's trace, and which PostgreSQL columns changed type in a way the
registered schema cannot be promoted to. The trace below is the one Kafka Connect
reported for `alter column qty type text` on a bigint column in
tests/e2e/test_schema_evolution.py (Apicurio 2.6.13's converter, BACKWARD rule)."""

from __future__ import annotations

from stack.api import refused_subject, type_changes

TRACE = (
    "org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded in error handler\n"
    "\tat org.apache.kafka.connect.runtime.errors.RetryWithToleranceOperator.execAndHandleError(...)\n"
    "Caused by: io.apicurio.registry.rest.client.exception.RuleViolationException: Incompatible artifact: "
    "evo_avro.evo.item-value [AVRO], num of incompatible diffs: {2}, list of diff types: [reader union lacking "
    "writer type: RECORD at /fields/1/type/1, reader union lacking writer type: RECORD at /fields/0/type/1] "
    "Causes: reader union lacking writer type: RECORD at /fields/1/type/1, reader union lacking writer type: "
    "RECORD at /fields/0/type/1\n"
    "\tat io.apicurio.registry.rest.client.exception.ExceptionMapper.map(ExceptionMapper.java:49)\n"
)
# The `after` record's fields of the latest registered version, as Debezium wrote them.
REGISTERED = {"id": "int", "name": "string", "qty": "long", "price": "bytes", "color": "string"}


def test_the_refused_subject_and_the_registry_causes():
    assert refused_subject(TRACE) == (
        "evo_avro.evo.item-value",
        "reader union lacking writer type: RECORD at /fields/1/type/1, reader union lacking writer type: "
        "RECORD at /fields/0/type/1")
    assert refused_subject("org.apache.kafka.connect.errors.ConnectException: connection refused\n") is None


def test_only_types_avro_cannot_promote_are_changes():
    columns = [("id", "bigint"),            # int -> long: promoted, compatible
               ("name", "character varying"),  # string either way
               ("qty", "text"),             # long -> string: the change
               ("price", "numeric"),        # bytes either way (precise decimals)
               ("added", "integer")]        # not registered yet: compatible
    assert type_changes(REGISTERED, columns) == [("qty", "long", "string", "text")]
    assert type_changes({**REGISTERED, "id": "long"}, [("id", "integer")]) == [("id", "long", "int", "integer")]
    # decimal.handling.mode=double registers numerics as double
    assert type_changes({"price": "double"}, [("price", "numeric")], "double") == []
    assert type_changes({"price": "double"}, [("price", "numeric")]) == [("price", "double", "bytes", "numeric")]
