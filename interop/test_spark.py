"""Spark's restart is the oracle of `rebucket rewrite` on Spark checkpoints
(issue 12).

For each query of interop/spark/make_checkpoints.py: real Spark (pyspark
4.3.0, local[2]) makes a checkpoint at 2 state partitions; `rebucket rewrite
CKPT --buckets M --out NEW` for M = 8 and 3; then
  - Spark's statestore reader on NEW sees exactly the rows of the source,
    each with partition_id == Spark's pmod(hash(partition key), M);
  - the query restarted from NEW with more input reports M state store
    instances, and its output (after the initial run's) equals that of a
    reference query that saw all the input without rebucketing.
The same queries run again with the RocksDB provider (issue 13), changelog
checkpointing off and on; the restart to 8 keeps the setting the checkpoint
was made with and the restart to 3 flips it.
Negatives (an uncommitted last batch, a missing partition dir, a damaged
.delta, a missing or damaged RocksDB SST, a missing changelog): rebucket exits non-zero with the code of
EXPECTED_EXIT, writes nothing and leaves the source as it was.

REBUCKET_SKIP_SPARK=1 skips the module. Missing Java or pyspark is a failure,
and so is a rebucket binary without the Spark engine (REBUCKET_BIN, else one
built from ./cmd/rebucket). One SparkSession serves the whole module.
"""

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE / "spark"))
import make_checkpoints as mk  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("REBUCKET_SKIP_SPARK") == "1", reason="REBUCKET_SKIP_SPARK=1")

TARGETS = [8, 3]
# rebucket's exit codes (README): 2 damaged or unsupported input, 3 refused by
# a safety check. An uncommitted last batch is not damage: the rewrite is
# refused until the query reruns once (or --skip-uncommitted).
EXPECTED_EXIT = {"uncommitted": 3, "missing_partition": 2, "damaged_delta": 2,
                 "rocksdb_missing_sst": 2, "rocksdb_damaged_sst": 2, "rocksdb_missing_changelog": 2}


# --------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def spark():
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("no Java: Spark needs Java 17 (apt-get install openjdk-17-jre-headless), "
                    "or set REBUCKET_SKIP_SPARK=1 to skip the Spark tests")
    try:
        import pyspark  # noqa: F401
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:
        pytest.fail(f"{e}: install interop/requirements.txt (pyspark==4.3.0, pandas, pyarrow)")
    s = mk.session("rebucket-test-spark")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def rebucket_spark(tmp_path_factory):
    """Path of a rebucket binary that has the Spark engine."""
    path = os.environ.get("REBUCKET_BIN")
    if not path:
        path = str(tmp_path_factory.mktemp("bin") / "rebucket")
        p = subprocess.run(["go", "build", "-o", path, "./cmd/rebucket"], cwd=REPO, capture_output=True, text=True)
        if p.returncode != 0:
            pytest.fail(f"go build ./cmd/rebucket failed:\n{p.stderr}")
    if not os.access(path, os.X_OK):
        pytest.fail(f"rebucket binary {path} is not executable")
    h = subprocess.run([path, "rewrite", "--help"], capture_output=True, text=True)
    engine_lines = [l for l in (h.stdout + h.stderr).splitlines() if "--engine" in l]
    if not any("spark" in l for l in engine_lines):
        pytest.fail(f"{path}: `rebucket rewrite` has no --engine spark (help says: {engine_lines or 'no --engine flag'}); "
                    "the Spark rewrite (issue 12) is not in this binary")
    return path


def rebucket(binary, *args):
    return subprocess.run([binary, "--quiet", *map(str, args)], capture_output=True, text=True, timeout=600)


class Made:
    """A query's base checkpoint (2 partitions, initial batches run, restart
    input already visible in input/), its source state and the reference."""

    def __init__(self, root, spec, state, reference, instances):
        self.root, self.spec, self.state, self.reference = root, spec, state, reference
        self.instances = instances  # numStateStoreInstances per operator at 2 partitions
        self.ckpt = root / "checkpoint"
        self.srcs = {s.name: s for s in (root / "input").iterdir()}


_made = {}
_references = {}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("spark")


def made(spark, workdir, name):
    if name in _made:
        return _made[name]
    spec = mk.SPECS[name]
    root = workdir / name
    info = mk.make(spark, name, root, publish_readme=False)
    instances = [op["numStateStoreInstances"] for op in info["progress"][-1]["stateOperators"]]
    assert all(n % mk.N_PARTITIONS == 0 and n > 0 for n in instances), instances
    state = state_multiset(mk.state_rows(spark, root / "checkpoint", spec))
    # the restart input becomes visible; the base checkpoint is never
    # restarted itself (its input paths are absolute, so every rewritten
    # copy reads this same input dir)
    for src in (root / "more").iterdir():
        for f in sorted(src.iterdir()):
            shutil.copy2(f, root / "input" / src.name / f.name)
    # reference: a fresh query over all the input at 2 partitions, no
    # rebucketing, on the HDFS-backed store (the provider does not change
    # the result, so RocksDB variants share their query's reference)
    base = name.split("@")[0]
    if base not in _references:
        bspec = mk.SPECS[base]
        ref = workdir / (base + "-reference")
        srcs = {s: ref / "input" / s for s in bspec.make_input()}
        mk.write_batches(srcs, bspec.make_input(), 0, 99)
        mk.run(spark, bspec, ref / "checkpoint", srcs, ref / "output")
        _references[base] = mk.result(bspec, mk.read_output(ref / "output"))
    _made[name] = Made(root, spec, state, _references[base], instances)
    return _made[name]


def state_multiset(rows):
    return sorted(json.dumps([r["operatorId"], r["store"], r["key"], r["value"]], sort_keys=True, ensure_ascii=False)
                  for r in rows)


def tree_digest(d):
    """(relative path, size, sha256) of every file under d."""
    out = []
    for p in sorted(pathlib.Path(d).rglob("*")):
        if p.is_file():
            out.append((str(p.relative_to(d)), p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest()))
    return out


# --------------------------------------------------------------------------
# positive: rewrite, read, restart


@pytest.mark.parametrize("m", TARGETS)
@pytest.mark.parametrize("name", mk.POSITIVE + mk.ROCKS_POSITIVE + mk.ROCKS_TWS)
def test_rewrite_restart(spark, rebucket_spark, workdir, name, m):
    b = made(spark, workdir, name)
    before = tree_digest(b.ckpt)
    new = workdir / f"{name}-to{m}"
    p = rebucket(rebucket_spark, "rewrite", b.ckpt, "--buckets", m, "--out", new)
    assert p.returncode == 0, f"rebucket rewrite {name} --buckets {m}: exit {p.returncode}\n{p.stderr}"
    assert tree_digest(b.ckpt) == before, "rebucket modified the source checkpoint"

    # Spark's statestore reader on NEW: the same rows, each in Spark's partition
    rows = mk.state_rows(spark, new, b.spec)
    assert state_multiset(rows) == b.state, "the rewritten checkpoint does not hold the source's state rows"
    bad = [r for r in rows if r["partition_id"] != r["hash"] % m]
    assert not bad, f"{len(bad)} rows outside pmod(hash(key), {m}), e.g. {bad[:3]}"
    used = {r["partition_id"] for r in rows}
    assert used <= set(range(m)) and len(used) > 1

    # restart from NEW with more input; the checkpoint's M wins over the
    # session's shuffle.partitions (run() leaves the session at 2)
    out = workdir / f"{name}-to{m}-output"
    # RocksDB: the restart to 3 flips changelog checkpointing, so both
    # settings load what rebucket wrote from either kind of checkpoint
    changelog = b.spec.changelog if m == TARGETS[0] else not b.spec.changelog
    _, progress = mk.run(spark, b.spec, new, b.srcs, out, changelog=changelog)
    data = [pp for pp in progress if pp.get("numInputRows", 0) > 0]
    assert data, f"the restart read no input: {progress}"
    last = data[-1]
    ops = last["stateOperators"]
    assert len(ops) == len(b.spec.ops)
    # Spark counts store instances per partition and store (a join opens 4
    # stores per partition): scale what the 2-partition run reported
    want = [n // mk.N_PARTITIONS * m for n in b.instances]
    assert [op["numStateStoreInstances"] for op in ops] == want, ops
    got = mk.result(b.spec, mk.read_output(b.root / "output"), mk.read_output(out))
    assert got == b.reference, diff(got, b.reference)


def diff(got, want):
    if isinstance(got, dict):
        miss = [k for k in want if k not in got][:5]
        extra = [k for k in got if k not in want][:5]
        wrong = [(k, got[k], want[k]) for k in want if k in got and got[k] != want[k]][:5]
        return f"output differs from the reference: missing {miss}, extra {extra}, wrong {wrong}"
    return f"output differs from the reference: {len(got)} rows vs {len(want)}; " \
           f"first differences {[x for x in got if x not in want][:3]} / {[x for x in want if x not in got][:3]}"


# --------------------------------------------------------------------------
# negatives: a clear error, nothing written, the source untouched


def negative_checkpoint(spark, workdir, case):
    if case.startswith("rocksdb_"):
        changelog = case == "rocksdb_missing_changelog"
        base = made(spark, workdir, "agg_string@rocksdb" + ("-changelog" if changelog else "")).ckpt
        ck = workdir / f"{case}-checkpoint"
        if not ck.exists():
            shutil.copytree(base, ck)
            part = ck / "state" / "0" / "0"
            if case == "rocksdb_missing_changelog":
                (part / "2.changelog").unlink()
            else:
                sst = sorted((part / "SSTs").glob("*.sst"))[0]
                if case == "rocksdb_missing_sst":
                    sst.unlink()
                else:
                    raw = bytearray(sst.read_bytes())
                    raw[20] ^= 0x40  # inside the first data block: its XXH3 checksum fails
                    sst.write_bytes(bytes(raw))
        return ck
    if case == "uncommitted":
        root = workdir / case
        if not root.exists():
            mk.make(spark, case, root, publish_readme=False)
        return root / "checkpoint"
    base = made(spark, workdir, "agg_string").ckpt
    ck = workdir / f"{case}-checkpoint"
    if not ck.exists():
        shutil.copytree(base, ck)
        if case == "missing_partition":
            shutil.rmtree(ck / "state" / "0" / "1")
        elif case == "damaged_delta":
            d = ck / "state" / "0" / "0" / "2.delta"
            raw = bytearray(d.read_bytes())
            raw[len(raw) // 2] ^= 0x40  # inside the lz4 block: its checksum fails
            d.write_bytes(bytes(raw))
    return ck


@pytest.mark.parametrize("case", list(EXPECTED_EXIT))
def test_refused(spark, rebucket_spark, workdir, case):
    ck = negative_checkpoint(spark, workdir, case)
    before = tree_digest(ck)
    new = workdir / f"{case}-new"
    p = rebucket(rebucket_spark, "rewrite", ck, "--buckets", 8, "--out", new)
    assert p.returncode == EXPECTED_EXIT[case], f"exit {p.returncode}, want {EXPECTED_EXIT[case]}\n{p.stderr}"
    assert "panic" not in p.stderr and "goroutine" not in p.stderr, p.stderr
    assert p.stderr.strip(), "no error message"
    assert not new.exists(), f"{new} was written"
    assert tree_digest(ck) == before, "the source checkpoint changed"
