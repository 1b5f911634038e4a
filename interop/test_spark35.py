"""Checkpoints written by Spark 3.5, rewritten by rebucket and restarted by
Spark 3.5 (issue 12). Spark 3.5 writes no operator metadata, so rebucket
infers the operators from the layout; Spark 3.5's restart is the oracle.

pyspark 3.5 cannot share a process with pyspark 4.3, so this module runs
interop/spark/restart35.py with the interpreter of the second virtual
environment, .venv35 (interop/requirements35.txt; scripts/test.sh creates it),
or $REBUCKET_PYTHON35. For each query (aggregation on a string key, the
two-operator dropDuplicates + count, dropDuplicates) and M in (8, 3): the
checkpoint is made at 2 partitions (the aggregation also with the RocksDB
provider, changelog checkpointing off and on), `rebucket rewrite --buckets M`, Spark 3.5
restarts it with more input; the output must equal a reference query that
never rebucketed, the restart must report M state store instances, and the
source must be unchanged. One JVM serves all queries.

REBUCKET_SKIP_SPARK=1 skips the module. A missing .venv35, a pyspark there
that is not 3.5, or no Java is a failure, not a skip.
"""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
SCRIPT = HERE / "spark" / "restart35.py"
QUERIES = ["agg_string", "two_op", "dedup", "agg_string@rocksdb", "agg_string@rocksdb-changelog"]
TARGETS = [8, 3]

pytestmark = pytest.mark.skipif(os.environ.get("REBUCKET_SKIP_SPARK") == "1", reason="REBUCKET_SKIP_SPARK=1")


@pytest.fixture(scope="module")
def python35():
    py = os.environ.get("REBUCKET_PYTHON35") or str(REPO / ".venv35" / "bin" / "python")
    if not os.access(py, os.X_OK):
        pytest.fail(f"no Python with pyspark 3.5 at {py}: scripts/test.sh creates .venv35 "
                    "(python3 -m venv .venv35 && .venv35/bin/pip install -r interop/requirements35.txt), "
                    "or set REBUCKET_PYTHON35, or REBUCKET_SKIP_SPARK=1 to skip the Spark tests")
    p = subprocess.run([py, "-c", "import pyspark; print(pyspark.__version__)"], capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.startswith("3.5."):
        pytest.fail(f"{py} has no pyspark 3.5 (got {p.stdout.strip() or p.stderr.strip()[-300:]}); "
                    "install interop/requirements35.txt into it")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("no Java: Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    return py


@pytest.fixture(scope="module")
def results(python35, tmp_path_factory):
    """Run the oracle once for every query and target: {(name, M): result}."""
    binary = os.environ.get("REBUCKET_BIN")
    if not binary:
        binary = str(tmp_path_factory.mktemp("bin") / "rebucket")
        p = subprocess.run(["go", "build", "-o", binary, "./cmd/rebucket"], cwd=REPO, capture_output=True, text=True)
        if p.returncode != 0:
            pytest.fail(f"go build ./cmd/rebucket failed:\n{p.stderr}")
    work = tmp_path_factory.mktemp("spark35")
    p = subprocess.run([python35, str(SCRIPT), binary, str(work), *QUERIES, "--to", ",".join(map(str, TARGETS))],
                       capture_output=True, text=True, timeout=900)
    out = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[(r["name"], r["to"])] = r
    if not out:
        pytest.fail(f"restart35.py gave no results (exit {p.returncode}):\n{p.stderr[-4000:]}")
    return out


@pytest.mark.parametrize("m", TARGETS)
@pytest.mark.parametrize("name", QUERIES)
def test_spark35_rewrite_restart(results, name, m):
    r = results.get((name, m))
    assert r is not None, f"no result for {name} -> {m} (the oracle stopped early)"
    assert r["spark"].startswith("3.5."), r
    assert r.get("source_unchanged"), f"rebucket modified the source checkpoint: {r}"
    assert "rewrite_exit" not in r, f"rebucket rewrite {name} --buckets {m}: exit {r['rewrite_exit']}\n{r['stderr']}"
    assert "restart_error" not in r, f"Spark 3.5 could not restart the rewritten checkpoint: {r['restart_error']}"
    assert r["numStateStoreInstances"] == r["want_instances"], r
    assert r["output_equal"], f"output differs from the reference: {r}"
    assert r["ok"], r
