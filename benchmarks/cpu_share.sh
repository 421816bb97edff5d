#!/bin/bash
# Wall seconds and the machine's busy CPU seconds (from /proc/stat) of one command, and
# their ratio: the cores it kept busy on average. Run it on an otherwise idle machine.
#   benchmarks/cpu_share.sh CDC_SPARK_MASTER='local[1]' .venv/bin/dbt run --select orders --project-dir benchmarks/dbt
# (leading NAME=value words are set in the command's environment; its output goes to
# build/cpu_share.log)
set -euo pipefail
envs=()
while [[ $# -gt 0 && $1 == *=* ]]; do envs+=("$1"); shift; done
[[ $# -gt 0 ]] || { echo "usage: $0 [NAME=value ...] command [args ...]" >&2; exit 2; }
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }
mkdir -p build
b0=$(busy); t0=$(date +%s.%N)
env "${envs[@]}" "$@" > build/cpu_share.log 2>&1 || { echo "failed: see build/cpu_share.log" >&2; exit 1; }
t1=$(date +%s.%N); b1=$(busy)
awk -v b="$((b1 - b0))" -v hz="$(getconf CLK_TCK)" -v w="$(echo "$t1 - $t0" | bc)" \
  'BEGIN { printf "wall %.1f s, busy CPU %.1f s, cores kept busy %.2f\n", w, b / hz, b / hz / w }'
