#!/usr/bin/env python3
"""The peer of `rebucket rewrite` on Spark (issues 12/13): Spark 4.3's own
offline repartition, `spark._streamingCheckpointManager.repartition(ckpt, M)`,
on a RocksDB checkpoint of N distinct string keys (the only provider it
accepts).

    bench_repartition.py make DIR [--keys 1000000] [--provider rocksdb|hdfs]
                                                     query at 2 partitions, 2 batches
    bench_repartition.py repartition DIR [--to 8]    time it in a fresh JVM
    bench_repartition.py restart DIR --ckpt NEW [--to 8]
                                                     restart from NEW with one more batch, check
                                                     the state with Spark's reader

`repartition` prints JSON: seconds inside the session, wall seconds including
the JVM start, the JVM's peak RSS (VmHWM), checkpoint bytes before and after,
and Spark's statestore row count per partition afterwards (a sanity check).
"""

import argparse
import json
import os
import pathlib
import sys
import time

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def session(provider=ROCKSDB):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = (SparkSession.builder.master("local[2]").appName("bench-repartition")
         .config("spark.sql.shuffle.partitions", 2)
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", "2g")
         .config("spark.sql.streaming.stateStore.providerClass", provider)
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    return s


def du(d):
    return sum(p.stat().st_size for p in pathlib.Path(d).rglob("*") if p.is_file())


def jvm_hwm_kib(spark):
    pid = spark.sparkContext._gateway.proc.pid
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


def make(d, keys, provider=ROCKSDB):
    d = pathlib.Path(d).resolve()
    inp = d / "input"
    inp.mkdir(parents=True, exist_ok=True)
    with open(inp / "part-0000.json", "w") as f:
        for i in range(keys):
            f.write('{"k":"key-%d"}\n' % i)
    os.utime(inp / "part-0000.json", (time.time() - 100, time.time() - 100))
    with open(inp / "part-0001.json", "w") as f:
        for i in range(0, keys, 10):
            f.write('{"k":"key-%d"}\n' % i)
    spark = session(provider)
    t0 = time.monotonic()
    q = (spark.readStream.schema("k string").option("maxFilesPerTrigger", 1).json(str(inp))
         .groupBy("k").count().writeStream.outputMode("update").format("noop")
         .option("checkpointLocation", str(d / "checkpoint")).trigger(availableNow=True).start())
    q.awaitTermination()
    secs = time.monotonic() - t0
    print(json.dumps({"keys": keys, "query_seconds": round(secs, 1),
                      "batches": [{"batchId": p["batchId"], "numInputRows": p["numInputRows"],
                                   "durationMs": p["durationMs"].get("triggerExecution")} for p in q.recentProgress],
                      "checkpoint_bytes": du(d / "checkpoint")}))
    spark.stop()


def repartition(d, m):
    t_wall = time.monotonic()
    d = pathlib.Path(d).resolve()
    ck = str(d / "checkpoint")
    before = du(ck)
    spark = session()
    t0 = time.monotonic()
    spark._streamingCheckpointManager.repartition(ck, m)
    secs = time.monotonic() - t0
    wall = time.monotonic() - t_wall
    hwm = jvm_hwm_kib(spark)
    after = du(ck)
    per = {r.partition_id: r["count"] for r in
           spark.read.format("statestore").load(ck).groupBy("partition_id").count().collect()}
    print(json.dumps({"to": m, "repartition_seconds": round(secs, 1), "wall_seconds_incl_jvm_start": round(wall, 1),
                      "jvm_peak_rss_mib": hwm and round(hwm / 1024), "checkpoint_bytes_before": before,
                      "checkpoint_bytes_after": after, "grew_by": after - before,
                      "rows_per_partition": dict(sorted(per.items()))}))
    spark.stop()


def restart(d, ckpt, m):
    """Restart the query from ckpt (e.g. a rewritten copy) with one more file
    (every 10th key again) and check with Spark's own reader: M state store
    instances, every key once, the counts of all three batches, every row in
    pmod(hash(k), M)."""
    from pyspark.sql import functions as F

    d = pathlib.Path(d).resolve()
    inp = d / "input"
    n = sum(1 for _ in open(inp / "part-0000.json"))
    extra = inp / "part-0002.json"
    if not extra.exists():
        with open(extra, "w") as f:
            for i in range(0, n, 10):
                f.write('{"k":"key-%d"}\n' % i)
    provider = HDFS if not list(pathlib.Path(ckpt).glob("state/0/0/*.zip")) else ROCKSDB
    spark = session(provider)
    t0 = time.monotonic()
    q = (spark.readStream.schema("k string").option("maxFilesPerTrigger", 1).json(str(inp))
         .groupBy("k").count().writeStream.outputMode("update").format("noop")
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    q.awaitTermination()
    secs = time.monotonic() - t0
    last = [p for p in q.recentProgress if p["numInputRows"] > 0][-1]
    st = spark.read.format("statestore").load(str(ckpt))
    agg = st.agg(F.count("*").alias("rows"), F.countDistinct("key.k").alias("keys"),
                 F.sum("value.count").alias("total"),
                 F.sum((F.col("partition_id") != F.expr(f"pmod(hash(key.k), {m})")).cast("int")).alias("misplaced")
                 ).collect()[0]
    want_total = n + 2 * len(range(0, n, 10))
    res = {"restart_seconds": round(secs, 1), "batch": last["batchId"], "numInputRows": last["numInputRows"],
           "numStateStoreInstances": last["stateOperators"][0]["numStateStoreInstances"],
           "rows": agg["rows"], "keys": agg["keys"], "total": agg["total"], "want_total": want_total,
           "misplaced": agg["misplaced"]}
    res["ok"] = (res["numStateStoreInstances"] == m and agg["rows"] == n and agg["keys"] == n
                 and agg["total"] == want_total and agg["misplaced"] == 0)
    print(json.dumps(res))
    spark.stop()
    return 0 if res["ok"] else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["make", "repartition", "restart"])
    ap.add_argument("--ckpt", help="restart: the checkpoint to restart from (default DIR/checkpoint)")
    ap.add_argument("dir")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--to", type=int, default=8)
    ap.add_argument("--provider", choices=["rocksdb", "hdfs"], default="rocksdb",
                    help="state store of `make` (Spark's repartition accepts only rocksdb)")
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.dir, a.keys, {"rocksdb": ROCKSDB, "hdfs": HDFS}[a.provider])
    elif a.cmd == "repartition":
        repartition(a.dir, a.to)
    else:
        return restart(a.dir, a.ckpt or str(pathlib.Path(a.dir) / "checkpoint"), a.to)


if __name__ == "__main__":
    sys.exit(main())
