"""A partitioned export of many buckets (written one file at a time since
issue 14, item 7) reads back in pyarrow and DuckDB as the same rows per
bucket the manifest counts, in Parquet and Arrow IPC.

Uses REBUCKET_BIN (the built CLI); skipped when it is unset.
"""

import json
import os
import subprocess

import pytest

pa = pytest.importorskip("pyarrow")
ds = pytest.importorskip("pyarrow.dataset")
duckdb = pytest.importorskip("duckdb")

BIN = os.environ.get("REBUCKET_BIN")
pytestmark = pytest.mark.skipif(not BIN, reason="REBUCKET_BIN is not set")

BUCKETS = 4096


def run(*args):
    p = subprocess.run([BIN, "--quiet", *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"rebucket {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    d = tmp_path_factory.mktemp("many")
    s = d / "snap"
    run("generate", "--out", str(s), "--keys", "6000", "--sub-keys", "2", "--list-len", "2", "--buckets", str(BUCKETS), "--width", "4")
    manifest = json.loads((s / "MANIFEST.json").read_text())
    want = {b: n for b, n in enumerate(manifest["bucket_entries"]) if n}
    assert len(want) > BUCKETS // 2
    return d, s, want


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_many_bucket_partitions(many, fmt):
    d, s, want = many
    out = d / f"by_bucket_{fmt}"
    summary = json.loads(run("--json", "export", str(s), "--format", fmt, "--out", str(out), "--partition-by", "bucket"))
    assert len(summary["files"]) == len(want)
    assert summary["rows"] == sum(want.values())
    dset = ds.dataset(out, format="arrow" if fmt == "arrow" else "parquet", partitioning="hive")
    t = dset.to_table()
    got = {int(r["bucket"]): r["count_all"] for r in t.group_by(["bucket"]).aggregate([([], "count_all")]).to_pylist()}
    assert got == want
    # Every key sits in its partition's bucket once: no row was written to
    # a neighbour's file when the writer moved on.
    assert t.num_rows == len(set(zip(t["bucket"].to_pylist(), t["state"].to_pylist(), t["key"].to_pylist(), t["sub_key"].to_pylist())))
    if fmt == "parquet":
        rows = duckdb.connect().execute(
            f"select bucket, count(*) from read_parquet('{out}/*/*.parquet', hive_partitioning = true) group by all"
        ).fetchall()
        assert {int(b): n for b, n in rows} == want
