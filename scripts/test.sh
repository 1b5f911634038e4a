#!/usr/bin/env bash
# The README's test command: installs what the tests need (Go modules, the
# Python packages of the interop tests in a virtual environment and
# pyspark 3.5 in a second one (.venv35), npm's
# apache-arrow for the JavaScript interop test, and the Maven
# dependencies of interop/flink, real Flink for the Flink tests), then runs
# every test. REBUCKET_SKIP_FLINK=1 / REBUCKET_SKIP_SPARK=1 skip the
# real-engine tests explicitly.
#
#   scripts/test.sh           everything (what CI runs)
#   scripts/test.sh --quick   the developers' loop: go test -short without
#                             -race, the interop tests without the engines
#                             (no Maven, no Flink or Spark JVMs)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

echo "== go modules"
go mod download

echo "== python virtual environment for the interop tests (.venv)"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r interop/requirements.txt

echo "== npm: interop/js (apache-arrow, for the JavaScript interop test)"
(cd interop/js && npm ci --no-audit --no-fund --loglevel=error)

if [ "$quick" = 0 ]; then
  echo "== maven: interop/flink (real Flink 2.3.0 for the Flink interop tests; 218 MB into ~/.m2 the first time)"
  mvn -q -B -f interop/flink/pom.xml -DskipTests package
  # pyspark 3.5 cannot share a process with 4.3: interop/test_spark35.py runs
  # its Spark 3.5 oracle with this second environment's python.
  echo "== python virtual environment with pyspark 3.5 (.venv35, for interop/test_spark35.py)"
  if [ ! -x .venv35/bin/python ]; then
    python3 -m venv .venv35
  fi
  .venv35/bin/python -m pip install --quiet --disable-pip-version-check -r interop/requirements35.txt
fi

echo "== go vet"
go vet ./...

# The interop tests in Go find the venv's python through REBUCKET_PYTHON.
if [ "$quick" = 1 ]; then
  echo "== go test -short"
  REBUCKET_PYTHON="$PWD/.venv/bin/python" go test -short -timeout 20m ./...
  export REBUCKET_SKIP_FLINK=1 REBUCKET_SKIP_SPARK=1
else
  echo "== go test -race"
  REBUCKET_PYTHON="$PWD/.venv/bin/python" go test -race -timeout 20m ./...
fi

echo "== python interop tests"
mkdir -p .build
go build -o .build/rebucket ./cmd/rebucket
REBUCKET_BIN="$PWD/.build/rebucket" .venv/bin/python -m pytest -q interop
