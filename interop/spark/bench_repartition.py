#!/usr/bin/env python3
"""The peer of `rebucket rewrite` on Spark (issues 12/13): Spark 4.3's own
offline repartition, `spark._streamingCheckpointManager.repartition(ckpt, M)`,
on a RocksDB checkpoint of N distinct string keys (the only provider it
accepts), and the Spark restarts that prove both tools' results. bench/run.sh
(--only spark) drives it; each subcommand is one JVM.

    bench_repartition.py make DIR [--keys 1000000] [--provider rocksdb|hdfs]
        the query spark.readStream.schema("k string").json(DIR/input)
        .groupBy("k").count() at 2 partitions over one batch holding keys
        k0..k<N-1> once each (the keys of `rebucket generate --engine spark`);
        checkpoint in DIR/checkpoint
    bench_repartition.py repartition DIR [--ckpt CK] [--to 8]
        Spark's repartition of CK (default DIR/checkpoint) in place
    bench_repartition.py restart DIR --ckpt CK [--to 8]
        restart the query of `make` from CK with one more batch (every 10th
        key again) and check the state with Spark's reader
    bench_repartition.py restart-generated CK --input NEWDIR --keys N [--to 8]
        the same for a checkpoint of `rebucket generate --engine spark --keys N`
        (key k<i> counted i%5+1 times) or a rewrite of it; the restart reads
        NEWDIR, where the extra batch is written (the generated checkpoint
        names an input file it does not need)

Every subcommand prints one JSON line. `repartition`: seconds inside the
session, wall seconds from the interpreter's start (JVM start included), the
JVM's peak RSS (VmHWM), checkpoint bytes before and after. The restarts: "ok" is true
when the restarted query reports M state store instances, Spark's reader sees
every key once with the expected total count (a key that lost its state would
count from zero), and no row lies outside pmod(hash(k), M). Exit 1 if not ok.
"""

import argparse
import json
import os
import pathlib
import sys
import time

T_START = time.monotonic()

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def session(provider=ROCKSDB, memory="2g"):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = (SparkSession.builder.master("local[2]").appName("bench-repartition")
         .config("spark.sql.shuffle.partitions", 2)
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", memory)
         .config("spark.sql.streaming.stateStore.providerClass", provider)
         # no background snapshot/cleanup passes racing the measured work
         .config("spark.sql.streaming.stateStore.maintenanceInterval", "600s")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    return s


def du(d):
    return sum(p.stat().st_size for p in pathlib.Path(d).rglob("*") if p.is_file())


def jvm_cpu_seconds(spark):
    """CPU time of the JVM so far: it is not a waited-for child of the
    caller, so the caller's rusage does not include it."""
    pid = spark.sparkContext._gateway.proc.pid
    st = pathlib.Path(f"/proc/{pid}/stat").read_text()
    f = st[st.rindex(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def jvm_hwm_kib(spark):
    pid = spark.sparkContext._gateway.proc.pid
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


def write_keys(path, keys, step=1):
    tmp = path.with_name("." + path.name + ".tmp")
    with open(tmp, "w") as f:
        for lo in range(0, keys, 100_000 * step):
            f.write("".join('{"k":"k%d"}\n' % i for i in range(lo, min(keys, lo + 100_000 * step), step)))
    os.rename(tmp, path)


def query(spark, inp, ckpt):
    return (spark.readStream.schema("k string").option("maxFilesPerTrigger", 1).json(str(inp))
            .groupBy("k").count().writeStream.outputMode("update").format("noop")
            .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())


def make(d, keys, provider, memory):
    d = pathlib.Path(d).resolve()
    inp = d / "input"
    inp.mkdir(parents=True, exist_ok=True)
    write_keys(inp / "part-0000.json", keys)
    spark = session(provider, memory)
    t0 = time.monotonic()
    q = query(spark, inp, d / "checkpoint")
    q.awaitTermination()
    secs = time.monotonic() - t0
    print(json.dumps({"keys": keys, "spark": spark.version, "provider": provider.rsplit(".", 1)[1],
                      "query_seconds": round(secs, 1),
                      "batches": [{"batchId": p["batchId"], "numInputRows": p["numInputRows"],
                                   "durationMs": p["durationMs"].get("triggerExecution")} for p in q.recentProgress],
                      "checkpoint_bytes": du(d / "checkpoint")}))
    spark.stop()
    return 0


def repartition(ck, m, memory):
    ck = str(pathlib.Path(ck).resolve())
    before = du(ck)
    spark = session(memory=memory)
    t0 = time.monotonic()
    spark._streamingCheckpointManager.repartition(ck, m)
    secs = time.monotonic() - t0
    wall = time.monotonic() - T_START
    hwm = jvm_hwm_kib(spark)
    cpu = jvm_cpu_seconds(spark)
    after = du(ck)
    # Nothing else runs in this JVM (the caller samples its peak memory and
    # wall time); `restart` checks the result.
    print(json.dumps({"to": m, "spark": spark.version, "repartition_seconds": round(secs, 2),
                      "wall_seconds_incl_jvm_start": round(wall, 2),
                      "jvm_peak_rss_mib": hwm and round(hwm / 1024), "jvm_cpu_seconds": round(cpu, 2),
                      "checkpoint_bytes_before": before,
                      "checkpoint_bytes_after": after, "grew_by": after - before}), flush=True)
    spark.stop()
    return 0


def check_restart(ckpt, inp, m, keys, want_total, memory):
    """Restart the count query from ckpt reading inp (which holds one new
    file: every 10th key once) and check the state with Spark's reader."""
    from pyspark.sql import functions as F

    provider = ROCKSDB if list(pathlib.Path(ckpt).glob("state/0/0/*.zip")) else HDFS
    spark = session(provider, memory)
    t0 = time.monotonic()
    q = query(spark, inp, ckpt)
    q.awaitTermination()
    secs = time.monotonic() - t0
    if q.exception() is not None:
        print(json.dumps({"ok": False, "error": str(q.exception())[:2000]}))
        spark.stop()
        return 1
    data = [p for p in q.recentProgress if p["numInputRows"] > 0]
    if not data:
        print(json.dumps({"ok": False, "error": "the restart read no input", "progress": [p.json for p in q.recentProgress]}))
        spark.stop()
        return 1
    last = data[-1]
    st = spark.read.format("statestore").load(str(ckpt))
    agg = st.agg(F.count("*").alias("rows"), F.countDistinct("key.k").alias("keys"),
                 F.sum("value.count").alias("total"),
                 F.sum((F.col("partition_id") != F.expr(f"pmod(hash(key.k), {m})")).cast("int")).alias("misplaced")
                 ).collect()[0]
    res = {"spark": spark.version, "restart_seconds": round(secs, 1), "batch": last["batchId"],
           "numInputRows": last["numInputRows"],
           "numStateStoreInstances": last["stateOperators"][0]["numStateStoreInstances"],
           "rows": agg["rows"], "keys": agg["keys"], "total": agg["total"], "want_total": want_total,
           "misplaced": agg["misplaced"]}
    res["ok"] = (res["numStateStoreInstances"] == m and agg["rows"] == keys and agg["keys"] == keys
                 and agg["total"] == want_total and agg["misplaced"] == 0)
    print(json.dumps(res))
    spark.stop()
    return 0 if res["ok"] else 1


def restart(d, ckpt, m, memory):
    """Restart a checkpoint of `make` (or a copy rewritten by either tool)
    with one more file; every key had count 1, every 10th gets 2."""
    d = pathlib.Path(d).resolve()
    inp = d / "input"
    n = sum(1 for _ in open(inp / "part-0000.json"))
    extra = inp / "part-0001.json"
    if not extra.exists():
        # older mtime than nothing else matters: the seen part-0000 is skipped by name
        write_keys(extra, n, 10)
    return check_restart(ckpt, inp, m, n, n + len(range(0, n, 10)), memory)


def restart_generated(ckpt, inp, m, keys, memory):
    """Restart a generated checkpoint (or its rewrite): k<i> holds i%5+1."""
    inp = pathlib.Path(inp).resolve()
    inp.mkdir(parents=True, exist_ok=True)
    for p in inp.iterdir():
        p.unlink()
    write_keys(inp / "part-0001.json", keys, 10)
    base = sum(i % 5 + 1 for i in range(keys))
    return check_restart(ckpt, inp, m, keys, base + len(range(0, keys, 10)), memory)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["make", "repartition", "restart", "restart-generated"])
    ap.add_argument("dir", help="make/restart: the bench dir (input/, checkpoint/); restart-generated: the checkpoint")
    ap.add_argument("--ckpt", help="repartition/restart: the checkpoint (default DIR/checkpoint)")
    ap.add_argument("--input", help="restart-generated: a new input dir for the restart batch")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--to", type=int, default=8)
    ap.add_argument("--memory", default="2g", help="spark.driver.memory")
    ap.add_argument("--provider", choices=["rocksdb", "hdfs"], default="rocksdb",
                    help="state store of `make` (Spark's repartition accepts only rocksdb)")
    a = ap.parse_args()
    ck = a.ckpt or str(pathlib.Path(a.dir) / "checkpoint")
    if a.cmd == "make":
        return make(a.dir, a.keys, {"rocksdb": ROCKSDB, "hdfs": HDFS}[a.provider], a.memory)
    if a.cmd == "repartition":
        return repartition(ck, a.to, a.memory)
    if a.cmd == "restart":
        return restart(a.dir, ck, a.to, a.memory)
    if not a.input:
        ap.error("restart-generated needs --input")
    return restart_generated(a.dir, a.input, a.to, a.keys, a.memory)


if __name__ == "__main__":
    sys.exit(main())
