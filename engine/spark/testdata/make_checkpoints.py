import json, os, sys, time, shutil
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
base = sys.argv[1]
spark = (SparkSession.builder.master("local[2]")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.streaming.stateStore.minDeltasForSnapshot", "2")
         .config("spark.sql.streaming.stateStore.maintenanceInterval", "1s")
         .getOrCreate())
schema = "k string, n int, id long, v double"
def run(name, build, batches=3, nkeys=40):
    indir = f"{base}/{name}-in"; ck = f"{base}/{name}"
    shutil.rmtree(indir, ignore_errors=True); shutil.rmtree(ck, ignore_errors=True)
    os.makedirs(indir)
    for b in range(batches):
        with open(f"{indir}/b{b}.json", "w") as f:
            for i in range(nkeys):
                j = (i * 7 + b * 3) % (nkeys + 10)
                f.write(json.dumps({"k": f"k{j}", "n": j % 3, "id": j * 1000003, "v": j / 4}) + "\n")
        df = spark.readStream.schema(schema).json(indir)
        q = build(df).writeStream.format("noop").outputMode(build.mode).option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
        time.sleep(2.5)
    print("done", name, flush=True)
def agg_str(df): return df.groupBy("k").count()
agg_str.mode = "update"
def agg_str_int(df): return df.groupBy("k", "n").agg(F.sum("v").alias("s"), F.count("*").alias("c"))
agg_str_int.mode = "update"
def agg_long(df): return df.groupBy("id").agg(F.max("v"))
agg_long.mode = "update"
def dedup(df): return df.dropDuplicates(["k"])
dedup.mode = "append"
for name, b in [("agg_str", agg_str), ("agg_str_int", agg_str_int), ("agg_long", agg_long), ("dedup", dedup)]:
    run(name, b)
spark.stop()
