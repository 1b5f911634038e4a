import json, os, shutil, subprocess
from pyspark.sql import SparkSession
base = "/tmp/s-core/genrs"; shutil.rmtree(base, ignore_errors=True); os.makedirs(base)
indir = "/tmp/rebucket-spark-gen-input"; shutil.rmtree(indir, ignore_errors=True); os.makedirs(indir)
subprocess.run(["/tmp/s-core/rw/rw", "gen", f"{base}/ck", "1000", "2"], check=True)
with open(f"{indir}/gen-1.json", "w") as f:
    for i in range(0, 1200, 3):
        f.write(json.dumps({"k": f"k{i}"}) + "\n")
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate()
def expected():
    exp = {f"k{i}": (i % 5) + 1 for i in range(1000)}
    for i in range(0, 1200, 3):
        exp[f"k{i}"] = exp.get(f"k{i}", 0) + 1
    return exp
for label, m in [("plain", None), ("m8", 8)]:
    ck = f"{base}/ck" if m is None else f"{base}/ck8"
    if m:
        # rewrite from a pristine copy of the generated checkpoint
        subprocess.run(["/tmp/s-core/rw/rw", "gen", f"{base}/ck-src", "1000", "2"], check=True)
        subprocess.run(["/tmp/s-core/rw/rw", "rewrite", f"{base}/ck-src", ck, str(m)], check=True, capture_output=True)
    q = (spark.readStream.schema("k string").json(indir).groupBy("k").count()
         .writeStream.format("noop").outputMode("update").option("checkpointLocation", ck).trigger(availableNow=True).start())
    q.awaitTermination()
    so = q.lastProgress["stateOperators"][0]
    st = spark.read.format("statestore").load(ck)
    n = m or 2
    bad = st.where(f"partition_id != pmod(hash(key.k), {n})").count()
    got = {r["key"]["k"]: r["value"]["count"] for r in st.collect()}
    print(f"GENRESTART {label}: rows={len(got)} equal_expected={got == expected()} misplaced={bad} "
          f"numShufflePartitions={so['numShufflePartitions']} numStateStoreInstances={so['numStateStoreInstances']}", flush=True)
spark.stop()
