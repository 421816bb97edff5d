"""Reproduces the race behind `spark.sql.filesourceTableRelationCacheSize=0` in
profiles/profiles.yml: after each MERGE into a small Hudi table, three threads of one
Spark session query it at once (as dbt's threads run tests right after a build). With
Spark's table relation cache they share one Hudi file index, and a query now and then
fails with a NullPointerException in BaseHoodieTableFileIndex.getInputFileSlices.

    .venv/bin/python -m tools.repro.hudi_file_index_race --lakehouse /tmp/race --cache on --rounds 60
    .venv/bin/python -m tools.repro.hudi_file_index_race --lakehouse /tmp/race2 --cache off --rounds 60
    .venv/bin/python -m tools.repro.hudi_file_index_race --lakehouse /tmp/race3 --cache on --listing eager --rounds 60

Prints the rounds and how many queries failed (with the first error). Needs the jars of
`make setup` (CDC_SPARK_JARS as the Makefile exports it). Not a test: the race is rare
(2 of 60 rounds once; none since, in either listing mode: docs/reference/spark-and-hudi-settings.md).
"""

from __future__ import annotations

import argparse
import os
import threading


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lakehouse", required=True, help="an empty folder for the metastore and warehouse")
    parser.add_argument("--cache", choices=["on", "off"], required=True, help="Spark's table relation cache")
    parser.add_argument("--listing", choices=["lazy", "eager"], default="lazy",
                        help="hoodie.datasource.read.file.index.listing.mode (Hudi's default: lazy)")
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    os.environ["CDC_LAKEHOUSE_DIR"] = args.lakehouse

    from core.spark import get_session  # after CDC_LAKEHOUSE_DIR: the profile reads it

    size = "1000" if args.cache == "on" else "0"  # 1000 is Spark's default
    spark = get_session("local", {"spark.sql.filesourceTableRelationCacheSize": size,
                                  "hoodie.datasource.read.file.index.listing.mode": args.listing})
    spark.sql("create database if not exists race")
    spark.sql("create table if not exists race.t (id int, v string, o string) using hudi "
              "tblproperties (type = 'cow', primaryKey = 'id', preCombineField = 'o')")
    errors: list[str] = []

    def query(i: int) -> None:
        try:
            spark.sql(f"select count(*) from race.t where id is not null and id > {i % 3}").collect()
        except Exception as exc:  # noqa: BLE001 - counting failures is the point
            errors.append(str(exc).splitlines()[0][:200])

    for i in range(args.rounds):
        spark.sql(f"merge into race.t as t using (select {i % 20} as id, 'x{i}' as v, '{i:06d}' as o) as s "
                  "on t.id = s.id when matched then update set v = s.v, o = s.o "
                  "when not matched then insert (id, v, o) values (s.id, s.v, s.o)")
        threads = [threading.Thread(target=query, args=(k,)) for k in range(args.threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    print(f"cache {args.cache}, listing {args.listing}: {args.rounds} rounds, {len(errors)} failed queries", errors[:1])


if __name__ == "__main__":
    main()
