#!/usr/bin/env python3
"""The peer of `rebucket rewrite` on Spark (issues 12/13): Spark 4.3's own
offline repartition, `spark._streamingCheckpointManager.repartition(ckpt, M)`,
on a RocksDB checkpoint of N distinct string keys (the only provider it
accepts).

    bench_repartition.py make DIR [--keys 1000000]   query at 2 partitions, 2 batches
    bench_repartition.py repartition DIR [--to 8]    time it in a fresh JVM

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


def session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = (SparkSession.builder.master("local[2]").appName("bench-repartition")
         .config("spark.sql.shuffle.partitions", 2)
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", "2g")
         .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
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


def make(d, keys):
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
    spark = session()
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
    from pyspark.sql import functions as F

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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["make", "repartition"])
    ap.add_argument("dir")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--to", type=int, default=8)
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.dir, a.keys)
    else:
        repartition(a.dir, a.to)


if __name__ == "__main__":
    main()
