#!/usr/bin/env bash
# The README's test command: installs what the tests need (Go modules, the
# Python packages of the interop tests in a virtual environment, npm's
# apache-arrow for the JavaScript interop test, and the Maven
# dependencies of interop/flink, real Flink for the Flink tests), then runs
# every test. REBUCKET_SKIP_FLINK=1 skips the real-Flink tests explicitly.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== go modules"
go mod download

echo "== python virtual environment for the interop tests (.venv)"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r interop/requirements.txt

echo "== npm: interop/js (apache-arrow, for the JavaScript interop test)"
(cd interop/js && npm ci --no-audit --no-fund --loglevel=error)

echo "== maven: interop/flink (real Flink 2.3.0 for the Flink interop tests; 218 MB into ~/.m2 the first time)"
mvn -q -B -f interop/flink/pom.xml -DskipTests package

echo "== go vet"
go vet ./...

echo "== go test -race"
# The interop tests in Go find the venv's python through REBUCKET_PYTHON.
REBUCKET_PYTHON="$PWD/.venv/bin/python" go test -race -timeout 20m ./...

echo "== python interop tests"
mkdir -p .build
go build -o .build/rebucket ./cmd/rebucket
REBUCKET_BIN="$PWD/.build/rebucket" .venv/bin/python -m pytest -q interop
