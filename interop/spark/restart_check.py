#!/usr/bin/env python3
"""The restart oracle as a script, for any pyspark version (Spark 3.5 has no
statestore reader, so only the restart is checked):

    restart_check.py REBUCKET_BIN WORKDIR [NAME ...] [--to 8]

For each query: make its checkpoint at 2 partitions, `REBUCKET_BIN rewrite
CKPT --buckets M --out NEW`, restart from NEW with more input, and compare
the output with a reference run over all the input; also check the state
store instance count of the restart. Prints one JSON line per query; exit 1
if any failed.
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_checkpoints as mk  # noqa: E402


def check(spark, binary, work, name, m):
    spec = mk.SPECS[name]
    root = work / name
    info = mk.make(spark, name, root, publish_readme=False)
    inst = [op["numStateStoreInstances"] for op in info["progress"][-1]["stateOperators"]]
    for src in (root / "more").iterdir():
        for f in sorted(src.iterdir()):
            shutil.copy2(f, root / "input" / src.name / f.name)
    new = work / f"{name}-to{m}"
    if new.exists():
        shutil.rmtree(new)
    p = subprocess.run([binary, "rewrite", str(root / "checkpoint"), "--buckets", str(m), "--out", str(new)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return {"name": name, "ok": False, "rewrite_exit": p.returncode, "stderr": p.stderr[-500:]}
    srcs = {s.name: s for s in (root / "input").iterdir()}
    secs, progress = mk.run(spark, spec, new, srcs, work / f"{name}-to{m}-output")
    last = [pp for pp in progress if pp.get("numInputRows", 0) > 0][-1]
    got_inst = [op["numStateStoreInstances"] for op in last["stateOperators"]]
    ref = work / (name + "-reference")
    if ref.exists():
        shutil.rmtree(ref)
    data = spec.make_input()
    rsrcs = {s: ref / "input" / s for s in data}
    mk.write_batches(rsrcs, data, 0, 99)
    mk.run(spark, spec, ref / "checkpoint", rsrcs, ref / "output")
    got = mk.result(spec, mk.read_output(root / "output"), mk.read_output(work / f"{name}-to{m}-output"))
    want = mk.result(spec, mk.read_output(ref / "output"))
    want_inst = [n // mk.N_PARTITIONS * m for n in inst]
    return {"name": name, "spark": spark.version, "to": m, "restart_seconds": round(secs, 1),
            "numStateStoreInstances": got_inst, "want_instances": want_inst,
            "output_equal": got == want, "ok": got == want and got_inst == want_inst}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("workdir")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--to", type=int, default=8)
    a = ap.parse_args()
    work = pathlib.Path(a.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    spark = mk.session("restart-check")
    ok = True
    for name in a.names or ["agg_string", "agg_string_int", "agg_long", "dedup"]:
        r = check(spark, a.binary, work, name, a.to)
        ok &= r["ok"]
        print(json.dumps(r), flush=True)
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
