"""Run a Python module under spark-submit, as `python -m <module> <args>` would:
spark-submit takes a file, not a module (`spark-submit ... tools/spark_submit_module.py
ingestion --target none --input ...`; docs/how-to/run-on-a-cluster.md)."""

import runpy
import sys

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: spark-submit [options] tools/spark_submit_module.py MODULE [ARGS...]")
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
