"""Hudi's metastore sync and Spark's catalog share one embedded metastore.

Every Spark SQL write of a Hudi table with a Hive catalog syncs the table through Hive's
own client (Hudi turns that on and no setting turns it off). Hive's ObjectStore keeps
one DataNucleus PersistenceManagerFactory per JVM and builds a new one whenever a
client's `*jdo*` / `*datanucleus*` settings differ from the last client's. With the
metastore URL given as `spark.hadoop.javax.jdo.option.ConnectionURL`, Spark's client
carried that extra key and Hudi's did not, so every Hudi write rebuilt the factory twice,
under dbt's other thread: a full-refresh build once failed with DataNucleus'
`"ownerIdx" is null` in `create_table`. The `local` target gives the metastore settings
as JVM system properties, which both clients read the same.
"""

from __future__ import annotations

import threading

import pytest

from tests.support.lakehouse import drop_schemas

pytestmark = pytest.mark.integration

SCHEMA = "metastore_check"


def _factory_identity(spark) -> int:
    """Identity of the metastore's current PersistenceManagerFactory (ObjectStore.pmf)."""
    jvm = spark._jvm
    field = jvm.java.lang.Class.forName("org.apache.hadoop.hive.metastore.ObjectStore").getDeclaredField("pmf")
    field.setAccessible(True)
    factory = field.get(None)
    assert factory is not None, "the metastore has no PersistenceManagerFactory: was it used yet?"
    return jvm.java.lang.System.identityHashCode(factory)


@pytest.fixture
def schema(spark):
    drop_schemas(spark, [SCHEMA])
    spark.sql(f"create schema {SCHEMA}")
    yield SCHEMA
    drop_schemas(spark, [SCHEMA])


def test_hudi_writes_keep_the_metastore_factory(spark, schema):
    before = _factory_identity(spark)
    spark.sql(f"create table {schema}.t using hudi tblproperties (primaryKey = 'id') as select 1 as id, 'a' as v")
    spark.sql(f"insert into {schema}.t select 2 as id, 'b' as v")
    spark.sql(f"merge into {schema}.t as t using (select 1 as id, 'c' as v) as s on t.id = s.id "
              "when matched then update set * when not matched then insert *")
    assert _factory_identity(spark) == before, (
        "a Hudi write rebuilt the metastore's PersistenceManagerFactory: Hudi's Hive client "
        "and Spark's disagree on a jdo/datanucleus setting (give those as JVM system "
        "properties in spark.driver.extraJavaOptions, not as spark.hadoop.* settings)"
    )
    rows = [tuple(r) for r in spark.sql(f"select id, v from {schema}.t order by id").collect()]
    assert rows == [(1, "c"), (2, "b")]


def test_parallel_hudi_table_creation(spark, schema):
    """Four threads create and write Hudi tables at once, as dbt's threads do on a full
    refresh: every table is created and holds its rows."""
    threads, inserts = 4, 3
    barrier = threading.Barrier(threads)
    errors: dict[int, BaseException] = {}

    def build(i: int) -> None:
        try:
            barrier.wait()
            spark.sql(f"create table {schema}.p{i} using hudi tblproperties (primaryKey = 'id') "
                      f"as select 0 as id, 'p{i}' as v")
            for n in range(1, inserts + 1):
                spark.sql(f"insert into {schema}.p{i} select {n} as id, 'p{i}' as v")
        except BaseException as error:  # reported below, per thread
            errors[i] = error

    workers = [threading.Thread(target=build, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors, "; ".join(f"thread {i}: {str(e).splitlines()[0]}" for i, e in sorted(errors.items()))
    for i in range(threads):
        rows = [tuple(r) for r in spark.sql(f"select id, v from {schema}.p{i} order by id").collect()]
        assert rows == [(n, f"p{i}") for n in range(inserts + 1)]
