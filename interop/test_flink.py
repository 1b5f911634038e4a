"""Flink savepoints end to end, with real Flink as the oracle (issue 11).

Real Flink 2.3.0 (interop/flink, a Maven project) makes canonical savepoints of
the probe job at max parallelism 8 (heap and RocksDB backends, state in files
and inline in _metadata, Snappy-compressed); `rebucket rewrite` rewrites each
to 128, 256 and 5 buckets; Flink restores each result at parallelism 40 (128,
256) or 3 (5), feeds every key once more, and every key's state and timers must
have continued exactly like a restore of the original that never rebucketed.
A State Processor API savepoint and a sparse one at max parallelism 128
(committed under engine/flink/testdata/real) go through the same, and so do
savepoints keyed by Integer, Tuple2, Double, Short and Character, and a
Table/SQL job's (GROUP BY aggregates keyed by BinaryRowData; its oracle: every
group updated to count 2, none inserted anew). NATIVE savepoints and POJO keys
must be refused, with nothing written.

Needs java (17+) and mvn; Maven dependencies come from ~/.m2 (scripts/test.sh
fetches them). Skipped only when REBUCKET_SKIP_FLINK=1 is set; a missing Java
or Maven is a failure, not a skip. REBUCKET_BIN names the rebucket binary;
without it the test builds one with `go build ./cmd/rebucket`.
"""

import hashlib
import os
import pathlib
import re
import shutil
import struct
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
FLINK = REPO / "interop" / "flink"
REAL = REPO / "engine" / "flink" / "testdata" / "real"
KEYS = 200

# Savepoint name -> (the backend it was made with, which its restores use; the probe job).
MADE = {
    "heap-files": ("hashmap", "probe"),
    "heap-inline": ("hashmap", "probe"),
    "rocksdb-files": ("rocksdb", "probe"),
    "rocksdb-inline": ("rocksdb", "probe"),
    "heap-files-snappy": ("hashmap", "probe"),
    # Integer, Tuple2<String,Long>, Double, Short and Character keys.
    "types-heap": ("hashmap", "types"),
    "types-rocksdb": ("rocksdb", "types"),
    # Table/SQL GROUP BY aggregates: BinaryRowData keys (RowDataSerializer).
    "sql-heap": ("hashmap", "sql"),
    "sql-rocksdb": ("rocksdb", "sql"),
}
# Committed real savepoints that the run does not make again: name -> (backend,
# job, keys). spa-8 was written by the State Processor API; sparse-heap-128 has
# 5 keys at max parallelism 128 (mostly empty key groups) and goes down to 8.
COMMITTED = {
    "spa-8": ("hashmap", "probe", 200),
    "sparse-heap-128": ("hashmap", "probe", 5),
}
# Buckets -> the parallelism Flink restores the rewritten savepoint at.
TARGETS = {128: 40, 256: 40, 5: 3}
# The key-type savepoints (five keyed operators each) take part of the targets, to keep time.
TARGETS_OF = {
    "types-heap": {256: 40, 5: 3},
    "types-rocksdb": {128: 40},
    "sql-heap": {128: 40},
    "sql-rocksdb": {256: 40, 5: 3},
    "sparse-heap-128": {8: 3, 256: 40},
}

pytestmark = pytest.mark.skipif(
    os.environ.get("REBUCKET_SKIP_FLINK") == "1",
    reason="REBUCKET_SKIP_FLINK=1 asks to skip the real-Flink tests",
)


def run(cmd, timeout, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return p


def newest_mtime(root):
    return max(f.stat().st_mtime for f in root.rglob("*") if f.is_file())


@pytest.fixture(scope="session")
def java_cp():
    """Builds interop/flink when its sources are newer than the last build
    (offline first, from ~/.m2) and returns the runtime classpath."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not on PATH; the Flink interop tests need Java 17 and Maven "
                        "(set REBUCKET_SKIP_FLINK=1 to skip them explicitly)")
    cpfile = FLINK / "target" / "classpath.txt"
    sources = max(newest_mtime(FLINK / "src"), (FLINK / "pom.xml").stat().st_mtime)
    if not cpfile.exists() or cpfile.stat().st_mtime < sources:
        base = ["mvn", "-q", "-B", "-f", str(FLINK / "pom.xml"), "-DskipTests", "package"]
        p = run(base[:1] + ["-o"] + base[1:], 900)
        if p.returncode != 0:
            p = run(base, 1800)  # not cached yet: fetch from Maven Central
        if p.returncode != 0:
            pytest.fail(f"maven build of interop/flink failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    return f"{FLINK / 'target' / 'classes'}{os.pathsep}{cpfile.read_text().strip()}"


def java(cp, main, *args, timeout=900, add_opens=False):
    cmd = ["java", "-Xmx2g", "-XX:+UseSerialGC"]
    if add_opens:
        cmd.append("--add-opens=java.base/java.lang=ALL-UNNAMED")
    cmd += ["-cp", cp, f"probe.{main}", *map(str, args)]
    p = run(cmd, timeout)
    out = "\n".join(l for l in p.stdout.splitlines() if not l.startswith("SLF4J"))
    return p.returncode, out, p.stderr


@pytest.fixture(scope="session")
def rebucket_binary(tmp_path_factory):
    path = os.environ.get("REBUCKET_BIN")
    if path:
        if not os.access(path, os.X_OK):
            pytest.fail(f"REBUCKET_BIN={path} is not an executable")
        return path
    out = tmp_path_factory.mktemp("bin") / "rebucket"
    p = run(["go", "build", "-o", str(out), "./cmd/rebucket"], 600, cwd=REPO)
    if p.returncode != 0:
        pytest.fail(f"go build ./cmd/rebucket failed:\n{p.stderr}")
    return str(out)


@pytest.fixture(scope="session")
def savepoints(java_cp, tmp_path_factory):
    """Fresh savepoints from real Flink (one JVM, one MiniCluster), plus the
    committed State Processor API one."""
    out = tmp_path_factory.mktemp("flink-savepoints")
    rc, stdout, stderr = java(java_cp, "Make", out, KEYS, *MADE.keys(), "rocksdb-native", "pojo-heap")
    assert rc == 0, f"probe.Make failed ({rc}):\n{stdout}\n{stderr[-4000:]}"
    sps = {name: out / name for name in [*MADE, "rocksdb-native", "pojo-heap"]}
    for name, sp in sps.items():
        assert (sp / "_metadata").is_file(), f"{name}: no _metadata in {sp}\n{stdout}"
    # Inline means every handle is in _metadata; files means keyed state beside it.
    assert [f.name for f in sps["heap-inline"].iterdir()] == ["_metadata"]
    assert len(list(sps["heap-files"].iterdir())) > 1
    made = {name: (backend, job, KEYS) for name, (backend, job) in MADE.items()}
    for name, (backend, job, keys) in COMMITTED.items():
        shutil.copytree(REAL / name, out / name)
        sps[name] = out / name
        made[name] = (backend, job, keys)
    return sps, made


def tree_digest(root):
    h = hashlib.sha256()
    for f in sorted(pathlib.Path(root).rglob("*")):
        h.update(str(f.relative_to(root)).encode())
        if f.is_file():
            h.update(f.read_bytes())
    return h.hexdigest()


class _Meta:
    """Just enough of Flink's _metadata (v6, canonical handles) to find each
    operator's max parallelism field; see shared research section 5."""

    def __init__(self, b):
        self.b, self.p = b, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)
        self.p += struct.calcsize(fmt)
        return v[0]

    def skip(self, n):
        self.p += n

    def utf(self):
        self.skip(self.take(">H"))

    def stream(self):
        t = self.take(">b")
        if t == 0:
            return
        if t == 1:  # ByteStreamStateHandle: name, i32 length, bytes
            self.utf()
            self.skip(self.take(">i"))
        elif t == 2:  # FileStateHandle: i64 size, path
            self.p += 8
            self.utf()
        elif t == 6:  # RelativeFileStateHandle: path, i64 size
            self.utf()
            self.p += 8
        else:
            raise ValueError(f"stream handle type {t}")

    def keyed(self):
        t = self.take(">b")
        if t == 0:
            return
        if t != 7:
            raise ValueError(f"keyed handle type {t}")
        self.p += 4
        self.skip(8 * self.take(">i"))
        self.stream()

    def opstate(self):
        if self.take(">i"):
            assert self.take(">b") == 4
            for _ in range(self.take(">i")):
                self.utf()
                self.p += 1
                self.skip(8 * self.take(">i"))
            self.stream()

    def max_parallelism_offsets(self):
        assert self.take(">I") == 0x4960672D and self.take(">i") == 6
        self.p += 8
        assert self.take(">i") == 0, "master states"
        out = []
        for _ in range(self.take(">i")):
            self.utf()
            self.utf()
            self.p += 16 + 4
            out.append(self.p)
            self.p += 4
            self.stream()
            for _ in range(max(self.take(">i"), 0)):
                if self.take(">i") < 0:
                    continue
                self.opstate()
                self.opstate()
                self.keyed()
                self.keyed()
                assert self.take(">i") == 0 and self.take(">i") == 0, "channel state"
        return out


def patch_max_parallelism(src, dst, m):
    """The naive 'rebucketing' that Flink does not catch: copy the savepoint
    and set only the max parallelism fields of _metadata."""
    shutil.copytree(src, dst)
    b = bytearray((dst / "_metadata").read_bytes())
    for off in _Meta(bytes(b)).max_parallelism_offsets():
        struct.pack_into(">i", b, off, m)
    (dst / "_metadata").write_bytes(bytes(b))


def test_rebucketed_savepoints_restore_in_flink(savepoints, rebucket_binary, java_cp, tmp_path):
    sps, made_with = savepoints
    cases = []
    failures = []
    for name, (backend, job, keys) in made_with.items():
        src = sps[name]
        before = tree_digest(src)
        for buckets, par in TARGETS_OF.get(name, TARGETS).items():
            dst = tmp_path / f"{name}-{buckets}"
            p = run([rebucket_binary, "--quiet", "rewrite", str(src), "--buckets", str(buckets),
                     "--out", str(dst)], 600)
            if p.returncode != 0:
                failures.append(f"rebucket rewrite {name} --buckets {buckets}: exit {p.returncode}\n"
                                f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
                continue
            assert (dst / "_metadata").is_file(), f"{dst}: rewrite wrote no _metadata"
            cases.append(f"name={name}->{buckets}@{par}/{backend},job={job},savepoint={dst},p={par},"
                         f"m={buckets},backend={backend},ref={src},keys={keys}")
        assert tree_digest(src) == before, f"rewrite modified its source {src}"

    # The rewritten savepoint into the other backend, and into a job that does
    # not set its max parallelism (it must adopt the savepoint's).
    if (tmp_path / "heap-files-128").exists():
        cases.append(f"name=heap-files->128@40/rocksdb/unset,savepoint={tmp_path / 'heap-files-128'},"
                     f"p=40,m=unset,backend=rocksdb,ref={sps['heap-files']},keys={KEYS}")
    if (tmp_path / "rocksdb-files-256").exists():
        cases.append(f"name=rocksdb-files->256@3/hashmap/unset,savepoint={tmp_path / 'rocksdb-files-256'},"
                     f"p=3,m=unset,backend=hashmap,ref={sps['rocksdb-files']},keys={KEYS}")
    # Negative controls, so the oracle is known to tell a rebucketed savepoint
    # from a wrong one: the original is refused at max parallelism 128, and one
    # with only its _metadata max parallelism patched restores into RocksDB
    # "successfully" but loses most keys' state, which the oracle must catch.
    cases.append(f"name=original-at-128-must-fail,savepoint={sps['heap-files']},p=40,m=128,"
                 f"backend=hashmap,expect=fail")
    patched = tmp_path / "rocksdb-files-patched-128"
    patch_max_parallelism(sps["rocksdb-files"], patched, 128)
    cases.append(f"name=patched-max-parallelism-must-fail,savepoint={patched},p=40,m=128,"
                 f"backend=rocksdb,keys={KEYS},expect=fail")

    # Restore whatever was rewritten, even when some rewrites failed, so that one
    # run reports both.
    rc, out, err = java(java_cp, "Restore", *cases, timeout=1200)
    lines = [l for l in out.splitlines() if l.startswith("CASE ")]
    bad = [l for l in lines if "RESULT OK" not in l]
    restored = rc == 0 and len(lines) == len(cases) and not bad
    assert not failures and restored, (
        ("rewrites failed:\n" + "\n".join(failures) + "\n" if failures else "")
        + f"probe.Restore exit {rc}, {len(lines)} of {len(cases)} cases reported, {len(bad)} not OK\n"
        + f"{out}\n{err[-4000:] if not restored else ''}")


@pytest.mark.parametrize(
    "name, must_say",
    [
        # A NATIVE RocksDB savepoint: SST files, not key-group streams.
        ("rocksdb-native", r"canonical"),
        # A POJO key: its hash is user code; the refusal names the operator and the serializer.
        ("pojo-heap", r"pojo-counter[\s\S]*Pojo|Pojo[\s\S]*pojo-counter"),
    ],
)
def test_refused_savepoints_write_nothing(savepoints, rebucket_binary, tmp_path, name, must_say):
    sps, _ = savepoints
    src = sps[name]
    before = tree_digest(src)
    dst = tmp_path / f"{name}-128"
    p = run([rebucket_binary, "rewrite", str(src), "--buckets", "128", "--out", str(dst)], 300)
    assert p.returncode == 2, f"exit {p.returncode}, want 2\n{p.stdout}\n{p.stderr}"
    assert re.search(must_say, p.stderr, re.I), f"the refusal must match {must_say!r}:\n{p.stderr}"
    assert not dst.exists(), "a refused rewrite must write nothing"
    assert tree_digest(src) == before
