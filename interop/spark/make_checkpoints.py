#!/usr/bin/env python3
"""Real Spark Structured Streaming checkpoints with known input, for rebucket's
Spark engine (issue 12).

Each query runs on local[2] with spark.sql.shuffle.partitions=2 and the
default HDFS-backed state store, reads JSON files from a file source
(maxFilesPerTrigger=1, one file per micro-batch, trigger availableNow) and is
stopped after its initial batches are committed. Its sink is foreachBatch,
which writes each batch's rows to <root>/output/<batchId>.jsonl, so a restart
can be compared with a reference run that saw all the input at once.

Layout of one made checkpoint (the test module interop/test_spark.py imports
this file and uses the same functions):

    <root>/checkpoint/       the Spark checkpoint (offsets/, commits/, state/, sources/)
    <root>/input/<src>/      the files already read; ABSOLUTE file:// paths of
                             these files are recorded in checkpoint/sources/*/*
    <root>/more/<src>/       the input of the restart, not yet visible to the query
    <root>/output/           foreachBatch output of the initial run
    <root>/expected_state.jsonl  every state row as Spark's statestore reader sees it
    <root>/README.txt

Usage:
    make_checkpoints.py OUTDIR [NAME ...]       make the named (default: all) checkpoints
    make_checkpoints.py --list
"""

import argparse
import json
import os
import pathlib
import random
import shutil
import sys
import time

N_PARTITIONS = 2
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

# Keys with empty, non-ASCII, CJK and 4-byte UTF-8 strings, so the hash of
# every tail length and of multi-byte characters is exercised on real state.
SPECIAL = ["", "é", "naïve", "ключ", "键", "键盘", "🙂", "a b", "k\t1", "Ω≈ç"]


def string_keys(lo, hi):
    return [f"k{i}" for i in range(lo, hi)]


# --------------------------------------------------------------------------
# Input: a list of batches per source, each batch a list of JSON rows.


def input_agg_string(seed=1):
    r = random.Random(seed)
    old = string_keys(0, 150) + SPECIAL
    new = string_keys(150, 220)
    batches = [[{"k": r.choice(old)} for _ in range(250)] for _ in range(3)]
    batches += [[{"k": r.choice(old + new)} for _ in range(250)] for _ in range(2)]
    return {"s": batches}


def input_agg_string_int(seed=2):
    r = random.Random(seed)
    ks = string_keys(0, 40) + SPECIAL
    ns = [0, 1, -1, 7, 2147483647, -2147483648]

    def row(n_extra):
        return {"k": r.choice(ks), "n": r.choice(ns + n_extra)}

    batches = [[row([]) for _ in range(250)] for _ in range(3)]
    batches += [[row([42, 99]) for _ in range(250)] for _ in range(2)]
    return {"s": batches}


def input_agg_long(seed=3):
    r = random.Random(seed)
    ids = list(range(-50, 150)) + [2**63 - 1, -(2**63), 2**31, -(2**31) - 1, 2**40 + 7]
    more = list(range(1000, 1060))
    batches = [[{"id": r.choice(ids)} for _ in range(250)] for _ in range(3)]
    batches += [[{"id": r.choice(ids + more)} for _ in range(250)] for _ in range(2)]
    return {"s": batches}


def _v_of(k):
    # dropDuplicates keeps one row per key; v depends on k only, so which
    # duplicate survives cannot change the output.
    return sum(k.encode()) % 1000


def input_dedup(seed=4):
    r = random.Random(seed)
    old = string_keys(0, 200) + SPECIAL
    new = string_keys(200, 260)
    mk = lambda pool: [{"k": k, "v": _v_of(k)} for k in (r.choice(pool) for _ in range(200))]
    batches = [mk(old) for _ in range(3)] + [mk(old + new) for _ in range(2)]
    return {"s": batches}


def input_join(seed=5):
    r = random.Random(seed)
    ks = string_keys(0, 120) + SPECIAL
    left, right = [], []
    for b in range(5):
        pool = ks if b < 3 else ks + string_keys(120, 150)
        left.append([{"k": r.choice(pool), "a": b * 1000 + i} for i in range(60)])
        right.append([{"k": r.choice(pool), "b": b * 1000 + i} for i in range(60)])
    return {"left": left, "right": right}


def input_pandas(seed=6):
    r = random.Random(seed)
    old = string_keys(0, 120) + SPECIAL
    new = string_keys(120, 160)
    mk = lambda pool: [{"k": r.choice(pool), "x": r.randrange(100)} for _ in range(200)]
    return {"s": [mk(old) for _ in range(3)] + [mk(old + new) for _ in range(2)]}


def input_two_op(seed=7):
    r = random.Random(seed)
    old = string_keys(0, 100) + SPECIAL
    new = string_keys(100, 130)
    mk = lambda pool: [{"k": r.choice(pool), "v": r.randrange(8)} for _ in range(250)]
    return {"s": [mk(old) for _ in range(3)] + [mk(old + new) for _ in range(2)]}


# --------------------------------------------------------------------------
# Queries


def build_query(spark, name, srcs):
    """The streaming DataFrame of query `name`; srcs maps source name -> dir."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    def pandas_count(key, pdfs, state):
        # nested, so cloudpickle ships it by value: Python workers cannot
        # import this module when the tests load it from its path
        import pandas as pd

        (n, s) = state.get if state.exists else (0, 0)
        for pdf in pdfs:
            n += len(pdf)
            s += int(pdf["x"].sum())
        state.update((n, s))
        yield pd.DataFrame({"k": [key[0]], "n": [n], "s": [s]})

    def read(src, schema):
        return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(srcs[src]))

    base = name.split("@")[0]
    if base in ("agg_string", "uncommitted", "rocksdb"):
        return read("s", "k string").groupBy("k").count()
    if base == "agg_string_int":
        return read("s", "k string, n int").groupBy("k", "n").count()
    if base == "agg_long":
        return read("s", "id long").groupBy("id").count()
    if base == "dedup":
        return read("s", "k string, v int").dropDuplicates(["k"])
    if base == "join":
        left = read("left", "k string, a int")
        right = read("right", "k string, b int").withColumnRenamed("k", "rk")
        return left.join(right, F.expr("k = rk")).select("k", "a", "b")
    if base == "pandas":
        return (
            read("s", "k string, x int")
            .groupBy("k")
            .applyInPandasWithState(
                pandas_count,
                outputStructType="k string, n long, s long",
                stateStructType="n long, s long",
                outputMode="update",
                timeoutConf=GroupStateTimeout.NoTimeout,
            )
        )
    if base == "two_op":
        return read("s", "k string, v int").dropDuplicates(["k", "v"]).groupBy("k").count()
    if base == "tws":
        return (
            read("s", "k string, x int")
            .groupBy("k")
            .transformWithStateInPandas(
                statefulProcessor=_tws_processor(),
                outputStructType="k string, n long, s long, distinct long",
                outputMode="Update",
                timeMode="ProcessingTime",
            )
        )
    raise KeyError(name)


def _tws_processor():
    """A transformWithStateInPandas processor with every kind of state
    (issue 13): a value state with a TTL, a list state, a map state, and a
    processing-time timer. The TTL (a year) and the timer (a year ahead)
    never fire while the tests run, so the output is deterministic, but
    their column families hold rows."""
    from pyspark.sql.streaming import StatefulProcessor

    year_ms = 365 * 24 * 3600 * 1000

    class Proc(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.count = handle.getValueState("count", "n long, s long", year_ms)
            self.recent = handle.getListState("recent", "x int")
            self.seen = handle.getMapState("seen", "x int", "c long")

        def handleInputRows(self, key, rows, timerValues):
            import pandas as pd

            n, s = self.count.get() if self.count.exists() else (0, 0)
            xs = []
            for pdf in rows:
                xs += [int(x) for x in pdf["x"]]
            n += len(xs)
            s += sum(xs)
            self.count.update((n, s))
            self.recent.appendList([(x,) for x in xs[-3:]])
            for x in xs:
                c = self.seen.getValue((x,))[0] if self.seen.containsKey((x,)) else 0
                self.seen.updateValue((x,), (c + 1,))
            if not list(self.handle.listTimers()):
                self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + year_ms)
            distinct = len(list(self.seen.keys()))
            yield pd.DataFrame({"k": [key[0]], "n": [n], "s": [s], "distinct": [distinct]})

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            return iter([])

        def close(self):
            pass

    return Proc()


class Spec:
    def __init__(self, name, make_input, mode, compare, key, ops, provider=HDFS, note="", changelog=False):
        self.name = name
        self.make_input = make_input
        self.mode = mode  # output mode
        # "fold": update-mode output, the last row per key is the result;
        # "multiset": append-mode output, every emitted row counts.
        self.compare = compare
        self.key = key  # output columns that identify a result row (fold)
        # (operatorId, operator, [(storeName or None, partition-key columns)]):
        # the state key columns Spark partitions by, for the placement check.
        self.ops = ops
        self.provider = provider
        self.note = note
        # RocksDB changelog checkpointing (recorded nowhere in the checkpoint)
        self.changelog = changelog
        # Trigger.Once, one batch per run: a ProcessingTime transformWithState
        # never ends an availableNow run (it always asks for another batch,
        # SPARK-50180), so its batches are run one at a time.
        self.once = name.split("@")[0] == "tws"


JOIN_STORES = [
    (f"{side}-{kind}", ["field0"])  # the statestore reader names join keys field0..
    for side in ("left", "right")
    for kind in ("keyToNumValues", "keyWithIndexToValue")
]

SPECS = {
    s.name: s
    for s in [
        Spec("agg_string", input_agg_string, "update", "fold", ["k"],
             [(0, "stateStoreSave", [(None, ["k"])])]),
        Spec("agg_string_int", input_agg_string_int, "update", "fold", ["k", "n"],
             [(0, "stateStoreSave", [(None, ["k", "n"])])]),
        Spec("agg_long", input_agg_long, "update", "fold", ["id"],
             [(0, "stateStoreSave", [(None, ["id"])])]),
        Spec("dedup", input_dedup, "append", "multiset", None,
             [(0, "dedupe", [(None, ["k"])])]),
        Spec("join", input_join, "append", "multiset", None,
             [(0, "symmetricHashJoin", JOIN_STORES)]),
        Spec("pandas", input_pandas, "update", "fold", ["k"],
             [(0, "applyInPandasWithState", [(None, ["k"])])]),
        Spec("two_op", input_two_op, "update", "fold", ["k"],
             # operator ids are given from the sink down: the aggregation is 0
             [(0, "stateStoreSave", [(None, ["k"])]), (1, "dedupe", [(None, ["k", "v"])])]),
        # Negatives: rebucket must refuse them (exit 2, nothing written).
        Spec("uncommitted", input_agg_string, "update", "fold", ["k"],
             [(0, "stateStoreSave", [(None, ["k"])])],
             note="agg_string, then the last commits/ entry (and its .crc) deleted: "
                  "the last batch is in offsets/ but not committed"),
        Spec("rocksdb", input_agg_string, "update", "fold", ["k"],
             [(0, "stateStoreSave", [(None, ["k"])])], provider=ROCKSDB,
             note="agg_string with the RocksDB state store provider"),
    ]
}
POSITIVE = ["agg_string", "agg_string_int", "agg_long", "dedup", "join", "pandas", "two_op"]
SPECS["tws"] = Spec("tws", input_pandas, "update", "fold", ["k"],
                    [(0, "transformWithStateInPandasExec", [(None, ["k"])])], provider=ROCKSDB,
                    note="transformWithStateInPandas (RocksDB only): value state with TTL, list, map, timer")
SPECS["tws@rocksdb-changelog"] = Spec("tws@rocksdb-changelog", input_pandas, "update", "fold", ["k"],
                                      SPECS["tws"].ops, provider=ROCKSDB, changelog=True,
                                      note="tws with changelog checkpointing on")
ROCKS_TWS = ["tws", "tws@rocksdb-changelog"]
# The same queries with the RocksDB provider (issue 13), changelog
# checkpointing off (every batch a <v>.zip of SST files) and on
# (<v>.changelog files, a zip now and then).
ROCKS_POSITIVE = []
for _n in POSITIVE:
    for _suffix, _cl in (("@rocksdb", False), ("@rocksdb-changelog", True)):
        _b = SPECS[_n]
        SPECS[_n + _suffix] = Spec(_n + _suffix, _b.make_input, _b.mode, _b.compare, _b.key, _b.ops,
                                   provider=ROCKSDB, changelog=_cl,
                                   note=f"{_n} with the RocksDB provider, changelog checkpointing {'on' if _cl else 'off'}")
        ROCKS_POSITIVE.append(_n + _suffix)
N_INITIAL = 3  # batches of the initial run (0..2); the rest is restart input


# --------------------------------------------------------------------------
# Running


def session(app="rebucket-interop"):
    from pyspark.sql import SparkSession

    # Python workers (applyInPandasWithState) must use this interpreter,
    # which has pandas and pyarrow, not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.sql.shuffle.partitions", N_PARTITIONS)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "600s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


_mtime = [int(time.time()) - 100000]


def write_batches(dirs, batches_by_src, lo, hi):
    """Write batches lo..hi-1 of every source as one file each, with
    increasing modification times (the file source orders files by them)."""
    for src, batches in batches_by_src.items():
        d = pathlib.Path(dirs[src])
        d.mkdir(parents=True, exist_ok=True)
        for b in range(lo, min(hi, len(batches))):
            p = d / f"part-{b:04d}.json"
            tmp = d / f".tmp-{b:04d}"
            tmp.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in batches[b]), encoding="utf-8")
            _mtime[0] += 10
            os.utime(tmp, (_mtime[0], _mtime[0]))
            os.rename(tmp, p)


def _jsonable(v):
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v


CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


def run(spark, spec, ckpt, srcs, outdir, partitions=N_PARTITIONS, changelog=None):
    """Run the query until its available input is consumed; returns
    (seconds, list of progress dicts). Output rows go to outdir/<batch>.jsonl.
    changelog overrides the spec's RocksDB changelog checkpointing."""
    outdir = pathlib.Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)

    def sink(df, batch_id):
        rows = [{k: _jsonable(v) for k, v in r.asDict().items()} for r in df.collect()]
        tmp = outdir / f".{batch_id}.tmp"
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
        os.replace(tmp, outdir / f"{batch_id}.jsonl")

    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", spec.provider)
    spark.conf.set(CHANGELOG_CONF, str(spec.changelog if changelog is None else changelog).lower())
    try:
        t0 = time.monotonic()
        q = (
            build_query(spark, spec.name, srcs)
            .writeStream.outputMode(spec.mode)
            .foreachBatch(sink)
            .option("checkpointLocation", str(ckpt))
            .trigger(**({"once": True} if spec.once else {"availableNow": True}))
            .start()
        )
        q.awaitTermination()
        secs = time.monotonic() - t0
        if q.exception() is not None:
            raise RuntimeError(f"query {spec.name} failed: {q.exception()}")
        return secs, [json.loads(p.json) if hasattr(p, "json") else p for p in q.recentProgress]
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", str(N_PARTITIONS))
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", HDFS)
        spark.conf.set(CHANGELOG_CONF, "false")


def read_output(outdir):
    """Batches of a foreachBatch output dir: {batchId: [row, ...]}."""
    out = {}
    for p in pathlib.Path(outdir).glob("*.jsonl"):
        out[int(p.stem)] = [json.loads(l) for l in p.read_text(encoding="utf-8").splitlines() if l]
    return out


def result(spec, *outputs):
    """The query result of one or more output dicts, in batch order: the last
    row per key (fold) or the sorted multiset of rows (append)."""
    batches = []
    for o in outputs:
        batches += [o[b] for b in sorted(o)]
    if spec.compare == "fold":
        res = {}
        for rows in batches:
            for r in rows:
                res[json.dumps([r[c] for c in spec.key], ensure_ascii=False)] = r
        return res
    return sorted(json.dumps(r, sort_keys=True, ensure_ascii=False) for rows in batches for r in rows)


def state_rows(spark, ckpt, spec, batch_id=None):
    """Every state row per (operatorId, store) as Spark's statestore reader
    sees it, with Spark's own pmod(hash(partition key), M) for every M asked.
    Returns a list of dicts."""
    from pyspark.sql import functions as F

    rows = []
    if spec.name.split("@")[0] == "tws":
        return _tws_state_rows(spark, ckpt, spec, batch_id)
    for op_id, op_name, stores in spec.ops:
        for store, pcols in stores:
            r = spark.read.format("statestore").option("operatorId", op_id)
            if store:
                r = r.option("storeName", store)
            if batch_id is not None:
                r = r.option("batchId", batch_id)
            df = r.load(str(ckpt))
            h = F.hash(*[F.col("key." + c) for c in pcols])
            df = df.select(
                F.to_json("key").alias("key"),
                F.to_json("value").alias("value"),
                "partition_id",
                h.alias("hash"),
            )
            for x in df.collect():
                rows.append({
                    "operatorId": op_id, "operator": op_name, "store": store or "default",
                    "partition_id": x.partition_id, "hash": x.hash,
                    "key": json.loads(x.key), "value": json.loads(x.value) if x.value else None,
                })
    return rows


TWS_VARIABLES = ["count", "recent", "seen", "$timers"]


def _tws_state_rows(spark, ckpt, spec, batch_id=None):
    """The rows of every state variable of the tws query (and its timers),
    through the statestore reader's stateVarName / readRegisteredTimers."""
    from pyspark.sql import functions as F

    (op_id, op_name, [(_, pcols)]), = spec.ops
    rows = []
    for var in TWS_VARIABLES:
        r = spark.read.format("statestore").option("operatorId", op_id)
        r = r.option("readRegisteredTimers", "true") if var == "$timers" else r.option("stateVarName", var)
        if batch_id is not None:
            r = r.option("batchId", batch_id)
        df = r.load(str(ckpt))
        rest = [c for c in df.columns if c not in ("key", "partition_id")]
        if var == "$timers":
            rest = []  # the expiry is the restart's processing time plus a year
        df = df.select(
            F.to_json("key").alias("key"),
            F.to_json(F.struct(*rest)).alias("value"),
            "partition_id",
            F.hash(*[F.col("key." + c) for c in pcols]).alias("hash"),
        )
        for x in df.collect():
            rows.append({
                "operatorId": op_id, "operator": op_name, "store": var,
                "partition_id": x.partition_id, "hash": x.hash,
                "key": json.loads(x.key), "value": json.loads(x.value),
            })
    return rows


def make(spark, name, root, publish_readme=True):
    """Make checkpoint `name` under root (wiped first). Returns info dict."""
    spec = SPECS[name]
    root = pathlib.Path(root).resolve()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    data = spec.make_input()
    srcs = {s: root / "input" / s for s in data}
    more = {s: root / "more" / s for s in data}
    write_batches(more, data, N_INITIAL, 99)
    if spec.once:
        secs, progress = 0.0, []
        for b in range(N_INITIAL):
            write_batches(srcs, data, b, b + 1)
            s, p = run(spark, spec, root / "checkpoint", srcs, root / "output")
            secs, progress = secs + s, progress + p
    else:
        write_batches(srcs, data, 0, N_INITIAL)
        secs, progress = run(spark, spec, root / "checkpoint", srcs, root / "output")
    info = {"name": name, "seconds": round(secs, 2), "batches": len(progress)}
    if name == "uncommitted":
        commits = sorted(int(p.name) for p in (root / "checkpoint" / "commits").iterdir() if p.name.isdigit())
        last = commits[-1]
        (root / "checkpoint" / "commits" / str(last)).unlink()
        crc = root / "checkpoint" / "commits" / f".{last}.crc"
        if crc.exists():
            crc.unlink()
        info["deleted_commit"] = last
    # the statestore reader exists from Spark 4.0 on
    if name != "uncommitted" and int(spark.version.split(".")[0]) >= 4:
        st = state_rows(spark, root / "checkpoint", spec)
        with open(root / "expected_state.jsonl", "w", encoding="utf-8") as f:
            for r in st:
                f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
        info["state_rows"] = len(st)
    if publish_readme:
        write_readme(root, spec, data, info)
    info["progress"] = progress
    return info


QUERY_TEXT = {
    "agg_string": 'readStream.schema("k string").json(input/s).groupBy("k").count()  [update]',
    "agg_string_int": 'readStream.schema("k string, n int").json(input/s).groupBy("k", "n").count()  [update]',
    "agg_long": 'readStream.schema("id long").json(input/s).groupBy("id").count()  [update]',
    "dedup": 'readStream.schema("k string, v int").json(input/s).dropDuplicates(["k"])  [append]',
    "join": 'left = readStream.schema("k string, a int").json(input/left); '
            'right = readStream.schema("k string, b int").json(input/right).withColumnRenamed("k", "rk"); '
            'left.join(right, expr("k = rk")).select("k", "a", "b")  [append; 4 stores per partition]',
    "pandas": 'readStream.schema("k string, x int").json(input/s).groupBy("k").applyInPandasWithState('
              'running count n and sum s of x per k; state "n long, s long"; output "k string, n long, s long")  [update]',
    "two_op": 'readStream.schema("k string, v int").json(input/s).dropDuplicates(["k", "v"]).groupBy("k").count()  '
              '[update; operator 0 stateStoreSave keyed (k), operator 1 dedupe keyed (k, v)]',
}
QUERY_TEXT["tws"] = ('readStream.schema("k string, x int").json(input/s).groupBy("k").transformWithStateInPandas('
                     'value state count (n, s) with a TTL, list state recent, map state seen x -> c, a timer '
                     'a year ahead; output "k string, n long, s long, distinct long", ProcessingTime)  [update]')
QUERY_TEXT["uncommitted"] = QUERY_TEXT["agg_string"]
QUERY_TEXT["rocksdb"] = QUERY_TEXT["agg_string"]


def write_readme(root, spec, data, info):
    import pyspark

    nrows = {s: [len(b) for b in bs] for s, bs in data.items()}
    lines = [
        f"Spark checkpoint '{spec.name}' made by interop/spark/make_checkpoints.py",
        f"pyspark {pyspark.__version__}, local[2], spark.sql.shuffle.partitions={N_PARTITIONS}, "
        f"provider {spec.provider.rsplit('.', 1)[1]}, trigger availableNow, maxFilesPerTrigger=1, sink foreachBatch",
        "",
        "query:  " + QUERY_TEXT[spec.name.split("@")[0]],
        f"input:  JSON lines; batches 0..{N_INITIAL - 1} read from input/<src>/part-000b.json (rows per batch: "
        + ", ".join(f"{s}={n[:N_INITIAL]}" for s, n in nrows.items()) + ")",
        f"        more/<src>/ holds the restart input (batches {N_INITIAL}..): "
        + ", ".join(f"{s}={n[N_INITIAL:]}" for s, n in nrows.items()),
        "        To restart, copy more/<src>/* into input/<src>/ (of a COPY of this directory, see below).",
        f"output: output/<batchId>.jsonl, the foreachBatch rows of the initial run",
        f"state:  expected_state.jsonl = every state row as Spark's statestore reader sees it: operatorId,",
        "        store, partition_id, Spark's hash() of the partition key columns, key and value as JSON.",
        "        partition_id == pmod(hash, 2) on every row.",
        "",
        "ABSOLUTE PATHS: checkpoint/sources/<i>/<batch> lists the input files read, as absolute file:// URIs",
        f"of the directory where this was made ({root}/input/...). A restart must read the input at the same",
        "absolute path, or the file source re-reads those files as new. Copies elsewhere (testdata) are for",
        "reading only; tests that restart regenerate the checkpoint (make_checkpoints.py is deterministic in",
        "its input; the checkpoint bytes, query id and timestamps are not).",
        "",
        f"made in {info['seconds']} s; batches run: {info['batches']}",
    ]
    if spec.note:
        lines.insert(3, "note:   " + spec.note)
    if "deleted_commit" in info:
        lines.append(f"deleted: checkpoint/commits/{info['deleted_commit']} (offsets/{info['deleted_commit']} stays)")
    if "state_rows" in info:
        lines.append(f"state rows (all stores): {info['state_rows']}")
        per = {}
        for l in (root / "expected_state.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(l)
            k = (r["operatorId"], r["store"], r["partition_id"])
            per[k] = per.get(k, 0) + 1
        for k in sorted(per):
            lines.append(f"  operator {k[0]} store {k[1]} partition {k[2]}: {per[k]} rows")
    (root / "README.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list or not a.outdir:
        print("\n".join(SPECS))
        return 0
    spark = session()
    for name in a.names or list(SPECS):
        info = make(spark, name, pathlib.Path(a.outdir) / name)
        ops = info.pop("progress")[-1].get("stateOperators", [])
        info["numStateStoreInstances"] = [op.get("numStateStoreInstances") for op in ops]
        print(json.dumps(info), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
