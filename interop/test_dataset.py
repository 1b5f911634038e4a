"""Real readers read rebucket's exports, and rebucket imports a Parquet file
written by pyarrow.

Uses REBUCKET_BIN (the built CLI); skipped when it is unset.
"""

import json
import os
import struct
import subprocess

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
ds = pytest.importorskip("pyarrow.dataset")
duckdb = pytest.importorskip("duckdb")

BIN = os.environ.get("REBUCKET_BIN")
pytestmark = pytest.mark.skipif(not BIN, reason="REBUCKET_BIN is not set")

KEYS = 500
SUB_KEYS = 3


def run(*args):
    p = subprocess.run([BIN, "--quiet", *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"rebucket {' '.join(args)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds")
    s = d / "snap"
    run("generate", "--out", str(s), "--keys", str(KEYS), "--sub-keys", str(SUB_KEYS), "--buckets", "8", "--width", "2")
    manifest = json.loads((s / "MANIFEST.json").read_text())
    return d, s, manifest


def expected_counts(manifest):
    return {(st["step"], st["name"]): st["entries"] for st in manifest["states"]}


def expected_sum_per_user(snapdir):
    """Sum of count/per_user values, from the JSON Lines export (an
    independent path: decoded by rebucket into numbers, summed here)."""
    out = snapdir.parent / "sum.jsonl"
    if not out.exists():
        run("export", str(snapdir), "--format", "jsonl", "--state", "count/per_user", "--out", str(out))
    total = 0
    for line in out.read_text().splitlines():
        total += json.loads(line)["value"]
    return total


@pytest.fixture(scope="module")
def parquet_export(snap):
    d, s, _ = snap
    out = d / "export.parquet"
    summary = json.loads(run("--json", "export", str(s), "--format", "parquet", "--out", str(out), "--row-group-size", "1000"))
    return out, summary


def test_parquet_pyarrow(snap, parquet_export):
    d, s, manifest = snap
    out, summary = parquet_export
    t = pq.read_table(out)
    total = sum(expected_counts(manifest).values())
    assert t.num_rows == total == summary["rows"]
    names = t.schema.names
    for col in ["bucket", "step", "state", "key", "sub_key", "value", "value_int64", "value_json", "key_utf8"]:
        assert col in names
    assert t.schema.field("key").type == pa.binary()
    assert t.schema.field("bucket").type == pa.uint32()
    counts = {}
    for row in t.group_by(["step", "state"]).aggregate([([], "count_all")]).to_pylist():
        counts[(row["step"], row["state"])] = row["count_all"]
    assert counts == expected_counts(manifest)
    # value_int64 only on the int64 state; its sum equals the decoded values.
    per_user = t.filter(pa.compute.equal(t["state"], "per_user"))
    assert per_user["value_int64"].null_count == 0
    ints = [struct.unpack(">q", v)[0] for v in per_user["value"].to_pylist()]
    assert pa.compute.sum(per_user["value_int64"]).as_py() == sum(ints) == expected_sum_per_user(s)
    others = t.filter(pa.compute.not_equal(t["state"], "per_user"))
    assert others["value_int64"].null_count == others.num_rows
    # sub_key is null exactly outside the map state.
    sessions = t.filter(pa.compute.equal(t["state"], "open"))
    assert sessions["sub_key"].null_count == 0
    assert t.num_rows - sessions.num_rows == t.filter(pa.compute.is_null(t["sub_key"])).num_rows
    # Metadata: the manifest, the partitioning, the export description.
    md = pq.read_metadata(out)
    kv = md.metadata
    m = json.loads(kv[b"rebucket.manifest"])
    assert m["format"] == "rebucket-snapshot"
    assert m["partitioning"] == manifest["partitioning"]
    assert m["checksum"] == manifest["checksum"]
    assert json.loads(kv[b"rebucket.partitioning"]) == manifest["partitioning"]
    assert json.loads(kv[b"rebucket.export"])["worker_state_file"] == "export.workers.parquet"
    # Row groups as asked, zstd, statistics on.
    assert md.num_row_groups == (total + 999) // 1000
    col = md.row_group(0).column(names.index("bucket"))
    assert col.compression == "ZSTD"
    assert col.statistics is not None and col.statistics.has_min_max
    # Per-worker state table.
    w = pq.read_table(d / "export.workers.parquet")
    assert set(w.column("step").to_pylist()) == {"source", "enrich"}
    assert summary["worker_state_file"].endswith("export.workers.parquet")


def test_parquet_duckdb(snap, parquet_export):
    d, s, manifest = snap
    out, _ = parquet_export
    con = duckdb.connect()
    total = con.execute(f"select count(*) from read_parquet('{out}')").fetchone()[0]
    assert total == sum(expected_counts(manifest).values())
    rows = con.execute(f"select step, state, count(*) from read_parquet('{out}') group by all").fetchall()
    assert {(a, b): c for a, b, c in rows} == expected_counts(manifest)
    got = con.execute(
        f"select sum(value_int64) from read_parquet('{out}') where step = 'count' and state = 'per_user'"
    ).fetchone()[0]
    assert got == expected_sum_per_user(s)
    kv = con.execute(f"select key, value from parquet_kv_metadata('{out}')").fetchall()
    kv = {k.decode(): v for k, v in kv}
    assert json.loads(kv["rebucket.manifest"])["partitioning"] == manifest["partitioning"]


@pytest.mark.parametrize("by", ["state", "bucket"])
def test_partitioned_reads_as_partitions(snap, by):
    d, s, manifest = snap
    out = d / f"by_{by}"
    run("export", str(s), "--out", str(out), "--partition-by", by)
    total = sum(expected_counts(manifest).values())
    # pyarrow: hive partitioning discovers the partition columns.
    dset = ds.dataset(out, format="parquet", partitioning="hive")
    t = dset.to_table()
    assert t.num_rows == total
    con = duckdb.connect()
    if by == "state":
        assert "step" in dset.partitioning.schema.names and "state" in dset.partitioning.schema.names
        counts = {}
        for row in t.group_by(["step", "state"]).aggregate([([], "count_all")]).to_pylist():
            counts[(row["step"], row["state"])] = row["count_all"]
        assert counts == expected_counts(manifest)
        # Partition pruning: a filter on the partition reads only its files.
        only = dset.to_table(filter=(ds.field("step") == "count"))
        assert only.num_rows == expected_counts(manifest)[("count", "per_user")]
        rows = con.execute(
            f"select step, state, count(*) from read_parquet('{out}/*/*/*.parquet', hive_partitioning = true) group by all"
        ).fetchall()
        assert {(a, b): c for a, b, c in rows} == expected_counts(manifest)
    else:
        assert "bucket" in dset.partitioning.schema.names
        per_bucket = {r["bucket"]: r["count_all"] for r in t.group_by(["bucket"]).aggregate([([], "count_all")]).to_pylist()}
        assert {int(b): n for b, n in per_bucket.items()} == {b: n for b, n in enumerate(manifest["bucket_entries"]) if n}
        rows = con.execute(
            f"select bucket, count(*) from read_parquet('{out}/*/*.parquet', hive_partitioning = true) group by all"
        ).fetchall()
        assert {int(b): n for b, n in rows} == {b: n for b, n in enumerate(manifest["bucket_entries"]) if n}
    assert (out / "_rebucket" / "worker_state.parq").exists()


def test_arrow_ipc_pyarrow(snap):
    d, s, manifest = snap
    out = d / "export.arrow"
    run("export", str(s), "--format", "arrow", "--out", str(out))
    with pa.memory_map(str(out)) as f:
        t = pa.ipc.open_file(f).read_all()
    assert t.num_rows == sum(expected_counts(manifest).values())
    sch = t.schema
    assert sch.names[:6] == ["bucket", "step", "state", "key", "sub_key", "value"]
    assert sch.field("bucket").type == pa.uint32()
    assert pa.types.is_dictionary(sch.field("step").type)
    assert sch.field("step").type.value_type == pa.string()
    assert sch.field("key").type == pa.binary()
    assert sch.field("sub_key").nullable
    assert sch.field("value_int64").type == pa.int64()
    assert b"rebucket.manifest" in sch.metadata
    counts = {}
    for row in t.group_by(["step", "state"]).aggregate([([], "count_all")]).to_pylist():
        counts[(row["step"], row["state"])] = row["count_all"]
    assert counts == expected_counts(manifest)


def test_import_parquet_written_by_pyarrow(tmp_path):
    """A dataset made elsewhere: pyarrow writes the export's schema (no
    rebucket metadata); import takes the states from --states and keeps
    every row."""
    rows = {"step": [], "state": [], "key": [], "sub_key": [], "value": []}
    n = 300
    for i in range(n):
        k = f"user-{i}".encode()
        rows["step"].append("count")
        rows["state"].append("per_user")
        rows["key"].append(k)
        rows["sub_key"].append(None)
        rows["value"].append(struct.pack(">q", i))
        for j in range(2):
            rows["step"].append("sessions")
            rows["state"].append("open")
            rows["key"].append(k)
            rows["sub_key"].append(f"s{j}".encode())
            rows["value"].append(json.dumps({"seq": j}).encode())
    schema = pa.schema(
        [
            ("step", pa.string()),
            ("state", pa.string()),
            ("key", pa.binary()),
            ("sub_key", pa.binary()),
            ("value", pa.binary()),
        ]
    )
    src = tmp_path / "made_elsewhere.parquet"
    pq.write_table(pa.table(rows, schema=schema), src)
    out = tmp_path / "snap"
    # Without rebucket's metadata, kinds and per-worker state are unknown:
    # refused (exit 3) until the user says where they come from.
    p = subprocess.run([BIN, "--quiet", "import", str(src), "--buckets", "16", "--out", str(out)], capture_output=True, text=True)
    assert p.returncode == 3 and "--like SNAPSHOT" in p.stderr, p.stderr
    states = tmp_path / "states.json"
    states.write_text(json.dumps({"states": [
        {"id": 1, "step": "count", "name": "per_user", "kind": "value"},
        {"id": 2, "step": "sessions", "name": "open", "kind": "map"},
    ]}))
    res = json.loads(run("--json", "import", str(src), "--buckets", "16", "--mapping", "range", "--out", str(out),
                         "--states", str(states), "--no-worker-state"))
    assert res["entries"] == 3 * n
    assert res["states_from"] == "states file"
    assert res["verified"]
    kinds = {(s["step"], s["name"]): (s["kind"], s["entries"]) for s in res["states"]}
    assert kinds == {("count", "per_user"): ("value", n), ("sessions", "open"): ("map", 2 * n)}
    m = json.loads((out / "MANIFEST.json").read_text())
    assert m["partitioning"] == {"hash": "xxh3-64", "mapping": "range", "buckets": 16}
    # Read it back through an export: same rows as pyarrow wrote.
    back = tmp_path / "back.parquet"
    run("export", str(out), "--out", str(back))
    t = pq.read_table(back)
    assert t.num_rows == 3 * n
    # No codec hints were given, so no decoded columns.
    assert "value_int64" not in t.schema.names and "key_utf8" not in t.schema.names
    order = lambda r: (r[0], r[1] is not None, r[1] or b"", r[2])  # noqa: E731
    got = sorted(((r["key"], r["sub_key"], r["value"]) for r in t.select(["key", "sub_key", "value"]).to_pylist()), key=order)
    want = sorted(zip(rows["key"], rows["sub_key"], rows["value"]), key=order)
    assert got == want


def test_import_rejects_wrong_schema(tmp_path):
    # A string or integer key is encoded by the codec hints; a float is not a key.
    t = pa.table({"step": ["a"], "state": ["b"], "key": [1.5], "val": [b"1"]})
    src = tmp_path / "bad.parquet"
    pq.write_table(t, src)
    p = subprocess.run([BIN, "import", str(src), "--buckets", "4", "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert p.returncode == 2
    assert "column key is" in p.stderr and "double" in p.stderr.lower()
    assert "missing column value" in p.stderr
