"""`rebucket export` of real Spark checkpoints read by pyarrow and DuckDB.

For every checkpoint pyspark 4.3.0 wrote under
engine/spark/testdata/interop/ (made by interop/spark/make_checkpoints.py),
`rebucket export CKPT --out DIR` (Parquet) and `--format arrow` write one
table per operator and store; pyarrow (Parquet and Arrow IPC) and DuckDB
(Parquet) read them, and every row, as (operator, store, partition, key,
value), equals a row of expected_state.jsonl, which is Spark's own
`statestore` reader's view of the same checkpoint. The column types are
checked against Spark's state schema kept in each file's metadata.

Needs no Spark: only the binary (REBUCKET_BIN), pyarrow and duckdb.
"""

import collections
import json
import pathlib

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
ipc = pytest.importorskip("pyarrow.ipc")
duckdb = pytest.importorskip("duckdb")

REPO = pathlib.Path(__file__).resolve().parent.parent
CKPTS = REPO / "engine" / "spark" / "testdata" / "interop"
# transformWithState checkpoints (tws*) export their column families as the
# stored bytes, not typed columns: see the README.
NAMES = sorted(p.parent.name for p in CKPTS.glob("*/expected_state.jsonl") if not p.parent.name.startswith("tws"))

# Spark's JSON type names and the Arrow types rebucket exports them as.
SIMPLE = {
    "string": pa.string(), "integer": pa.int32(), "long": pa.int64(), "short": pa.int16(),
    "byte": pa.int8(), "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(),
    "binary": pa.binary(), "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"), "void": pa.null(),
}


def arrow_type(t):
    if isinstance(t, dict):
        return pa.struct([pa.field(f["name"], arrow_type(f["type"]), nullable=True) for f in t["fields"]])
    if t.startswith("decimal("):
        p, s = t[len("decimal("):-1].split(",")
        return pa.decimal128(int(p), int(s))
    return SIMPLE[t]


def canon(d, null_fields):
    """A row's key or value as sorted JSON, without the fields of Spark's
    void type (its statestore reader shows dropDuplicates' dummy as {})."""
    d = {k: v for k, v in (d or {}).items() if k not in null_fields}
    return json.dumps(d, sort_keys=True, default=str)


def expected(name):
    rows = collections.Counter()
    for line in (CKPTS / name / "expected_state.jsonl").read_text().splitlines():
        r = json.loads(line)
        rows[(r["operatorId"], r["store"], r["partition_id"], canon(r["key"], ()), canon(r["value"], ()))] += 1
    return rows


def null_fields(schema, col):
    t = schema.field(col).type
    return {t.field(i).name for i in range(t.num_fields) if pa.types.is_null(t.field(i).type)}


def rows_of(table):
    nk, nv = null_fields(table.schema, "key"), null_fields(table.schema, "value")
    out = collections.Counter()
    for r in table.to_pylist():
        out[(r["operator"], r["store"], r["partition"], canon(r["key"], nk), canon(r["value"], nv))] += 1
    return out


def export(rebucket, tmp_path, name, *args):
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / name
    p = rebucket("--json", "export", CKPTS / name / "checkpoint", "--out", out, *args, check=False)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    manifest = json.loads((out / "_rebucket_export.json").read_text())
    assert [f["file"] for f in manifest["files"]] == [f["file"] for f in summary["files"]]
    return out, summary


def check_types(table):
    md = table.schema.metadata
    for col, key in (("key", b"rebucket.spark.key_schema"), ("value", b"rebucket.spark.value_schema")):
        want = arrow_type(json.loads(md[key]))
        assert table.schema.field(col).type == want, (col, table.schema.field(col).type, want)
    assert table.schema.field("partition").type == pa.int32()
    assert table.schema.field("operator").type == pa.int32()


@pytest.mark.parametrize("name", NAMES)
def test_parquet_and_arrow_equal_sparks_reader(rebucket, tmp_path, name):
    want = expected(name)
    pq_dir, summary = export(rebucket, tmp_path, name)
    arrow_dir, _ = export(rebucket, tmp_path / "arrow", name, "--format", "arrow")
    got_pq, got_arrow, got_duck = collections.Counter(), collections.Counter(), collections.Counter()
    con = duckdb.connect()
    for f in summary["files"]:
        t = pq.read_table(pq_dir / f["file"])
        check_types(t)
        assert t.num_rows == f["rows"]
        got_pq += rows_of(t)
        a = ipc.open_file(arrow_dir / f["file"].replace(".parquet", ".arrow")).read_all()
        assert a.schema.equals(t.schema, check_metadata=True)
        got_arrow += rows_of(a)
        # DuckDB's own Parquet reader, struct fields by dot.
        nk, nv = null_fields(t.schema, "key"), null_fields(t.schema, "value")
        for op, store, part, k, v in con.execute(
            "SELECT operator, store, partition, to_json(key), to_json(value) FROM read_parquet(?)",
            [str(pq_dir / f["file"])],
        ).fetchall():
            got_duck[(op, store, part, canon(json.loads(k), nk), canon(json.loads(v), nv))] += 1
    assert sum(want.values()) == summary["rows"]
    assert got_pq == want
    assert got_arrow == want
    assert got_duck == want


def test_duckdb_query_of_the_readme(rebucket, tmp_path):
    """The README's example: counts per key of an aggregation, by SQL."""
    out, _ = export(rebucket, tmp_path, "agg_string_int")
    con = duckdb.connect()
    rows = con.execute(
        "SELECT key.k, key.n, value.count, partition FROM read_parquet(?) ORDER BY value.count DESC, key.k, key.n",
        [str(out / "0-default.parquet")],
    ).fetchall()
    want = sorted(
        ((r["key"]["k"], r["key"]["n"], r["value"]["count"], r["partition_id"])
         for r in map(json.loads, (CKPTS / "agg_string_int" / "expected_state.jsonl").read_text().splitlines())),
        key=lambda r: (-r[2], r[0], r[1]),
    )
    assert rows == want
