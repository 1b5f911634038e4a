#!/usr/bin/env bash
# The benchmark command (see BENCHMARKS.md): builds rebucket, makes sure the
# Python virtual environment with DuckDB exists, and runs bench/run.py,
# which generates inputs, times every row and writes the table.
#
#   bench/run.sh            default sizes (about 15-20 minutes on 2 cores)
#   bench/run.sh --quick    small sizes (under 2 minutes); the table goes to
#                           the work directory, BENCHMARKS.md is left alone
#   bench/run.sh --only flink   only the Flink savepoint rows (their own block)
#   bench/run.sh --only spark   only the Spark checkpoint rows (their own block):
#                           rebucket at 1M and 10M keys, and Spark 4.3's own
#                           repartition as the peer at 1M (pyspark from .venv;
#                           --spark-peer-keys 1M,10M adds 10M); its RocksDB
#                           checkpoints are cached in $TMPDIR/rebucket-bench-spark.
#                           On a shared machine add --jvm-lock /tmp/rebucket-jvm.lock
#   bench/run.sh --help     every option
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/time ]; then
  echo "bench: /usr/bin/time is missing (peak memory comes from it); install it, e.g. apt-get install -y time" >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r interop/requirements.txt
mkdir -p .build
go build -o .build/bench-rebucket ./cmd/rebucket
exec .venv/bin/python bench/run.py --bin "$PWD/.build/bench-rebucket" "$@"
