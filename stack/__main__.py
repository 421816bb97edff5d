"""``python -m stack``: start, stop and inspect the local CDC stack."""

from __future__ import annotations

import argparse
import json
import sys
import time

from . import api, spark_cluster
from .errors import StackError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start the stack (reuses what runs)")
    p_up.add_argument("--only", help=f"comma-separated subset of {','.join(api.COMPONENTS + spark_cluster.COMPONENTS)} "
                      "(the Spark cluster only when asked for: stack/spark_cluster.py)")
    p_down = sub.add_parser("down", help="stop everything the stack started")
    p_down.add_argument("--purge", action="store_true", help="also delete $CDC_STACK_DIR")
    sub.add_parser("status", help="services and connectors, as JSON")
    p_reg = sub.add_parser("register", help="register connectors and wait until RUNNING")
    p_reg.add_argument("names", nargs="+", help=f"one of {api.connector_names()}")
    p_unreg = sub.add_parser("unregister", help="delete connectors (and reset their offsets/slot)")
    p_unreg.add_argument("names", nargs="+")
    p_unreg.add_argument("--keep-offsets", action="store_true", help="do not reset offsets, slot, history")
    sub.add_parser("restart-connect", help="restart the Connect worker")
    p_off = sub.add_parser("offsets", help="end offsets of topics matching a regex")
    p_off.add_argument("topic_regex")
    p_wait = sub.add_parser("caught-up", help="wait until Debezium published everything committed")
    p_wait.add_argument("topic_regex")
    p_wait.add_argument("--quiet-seconds", type=float, default=5)
    p_wait.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args(argv)

    started = time.monotonic()
    try:
        if args.command == "up":
            only, cluster = spark_cluster.normalize(args.only.split(",")) if args.only else (None, [])
            info = api.up(only) if only is None or only else api.info([])
            cluster_env = spark_cluster.up(cluster) if cluster else {}
            print(f"stack up in {time.monotonic() - started:.1f}s: {', '.join(info.components)}")
            print(f"  postgres  127.0.0.1:{info.pg_port} (socket {info.pg_socket_dir}), database pagila")
            print(f"  mariadb   127.0.0.1:{info.mariadb_port} (socket {info.mariadb_socket}), database movies_db")
            print(f"  kafka     {info.kafka_bootstrap}")
            print(f"  connect   {info.connect_url}")
            if "s3" in info.components:
                print(f"  s3        {info.s3_endpoint}, bucket {info.s3_bucket} (s3a://{info.s3_bucket}/...; "
                      "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the environment or s3-credentials.env)")
            if "registry" in info.components:
                print(f"  registry  {info.registry_url} (Confluent-compatible API of Apicurio Registry)")
            if "metastore" in info.components:
                print("  metastore database metastore in the stack's PostgreSQL; to share it: "
                      + " ".join(f"export {k}={v}" for k, v in info.metastore_env.items()))
            if cluster:
                print(f"  spark     {cluster_env['CDC_SPARK_MASTER']} (UI {cluster_env['master_ui']}): "
                      + ", ".join(cluster))
            if "thrift" in cluster:
                print("  thrift    for `dbt --target thrift`: " + " ".join(
                    f"export {k}={cluster_env[k]}" for k in ("CDC_THRIFT_HOST", "CDC_THRIFT_PORT", "CDC_THRIFT_AUTH",
                                                             "CDC_THRIFT_USER")))
            print(f"  logs      {info.logs_dir}")
            print(f"  credentials: {info.stack_dir / 'credentials.env'} unless CDC_* variables are set")
        elif args.command == "down":
            spark_cluster.down()
            api.down(purge=args.purge)
            print("stack down" + (" (purged)" if args.purge else ""))
        elif args.command == "status":
            print(json.dumps(api.status(), indent=2))
        elif args.command == "register":
            for name in args.names:
                api.register(name)
                print(f"{name}: RUNNING")
        elif args.command == "unregister":
            for name in args.names:
                api.unregister(name, reset=not args.keep_offsets)
                print(f"{name}: deleted")
        elif args.command == "restart-connect":
            api.restart_connect()
            print(f"connect restarted in {time.monotonic() - started:.1f}s")
        elif args.command == "offsets":
            for (topic, partition), offset in sorted(api.end_offsets(args.topic_regex).items()):
                print(f"{topic}:{partition}:{offset}")
        elif args.command == "caught-up":
            offsets = api.wait_caught_up(args.topic_regex, args.quiet_seconds, args.timeout)
            print(f"caught up in {time.monotonic() - started:.1f}s: {sum(offsets.values())} records "
                  f"in {len(offsets)} partitions")
    except StackError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
