#!/usr/bin/env python3
"""The restart oracle for checkpoints written by Spark 3.5 (issue 12), run
with the pyspark 3.5 interpreter (.venv35) by interop/test_spark35.py:

    restart35.py REBUCKET_BIN WORKDIR [NAME ...] [--to 8,3]

One SparkSession serves every query. For each query of make_checkpoints.py
(default agg_string, two_op, dedup): Spark 3.5 makes its checkpoint at 2
partitions; the restart input is made visible; `REBUCKET_BIN rewrite CKPT
--buckets M --out NEW` for every M; Spark 3.5 restarts each NEW with the
more input, and its output (after the initial run's) is compared with a
reference query that read all the input at 2 partitions without
rebucketing; the restarted query must report M state store instances per
operator (x stores per partition). Spark 3.5 has no statestore reader, so
the state itself is not read back. Prints one JSON line per (query, M);
exit 1 if any is not ok.
"""

import argparse
import hashlib
import json
import pathlib
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_checkpoints as mk  # noqa: E402


def digest(d):
    h = hashlib.sha256()
    for p in sorted(pathlib.Path(d).rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(d)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def check(spark, binary, work, name, targets):
    spec = mk.SPECS[name]
    root = work / name
    t0 = time.monotonic()
    info = mk.make(spark, name, root, publish_readme=False)
    inst = [op["numStateStoreInstances"] for op in info["progress"][-1]["stateOperators"]]
    made_s = time.monotonic() - t0
    # the restart input becomes visible; the base checkpoint itself is never
    # restarted (its recorded input paths are absolute, so every rewritten
    # copy reads this same input dir)
    for src in (root / "more").iterdir():
        for f in sorted(src.iterdir()):
            shutil.copy2(f, root / "input" / src.name / f.name)
    srcs = {s.name: s for s in (root / "input").iterdir()}

    ref = work / (name + "-reference")
    if ref.exists():
        shutil.rmtree(ref)
    data = spec.make_input()
    rsrcs = {s: ref / "input" / s for s in data}
    mk.write_batches(rsrcs, data, 0, 99)
    mk.run(spark, spec, ref / "checkpoint", rsrcs, ref / "output")
    want = mk.result(spec, mk.read_output(ref / "output"))
    initial = mk.read_output(root / "output")

    out = []
    for m in targets:
        res = {"name": name, "spark": spark.version, "to": m, "make_seconds": round(made_s, 1)}
        before = digest(root / "checkpoint")
        new = work / f"{name}-to{m}"
        if new.exists():
            shutil.rmtree(new)
        p = subprocess.run([binary, "--quiet", "rewrite", str(root / "checkpoint"), "--buckets", str(m), "--out", str(new)],
                           capture_output=True, text=True, timeout=600)
        res["source_unchanged"] = digest(root / "checkpoint") == before
        if p.returncode != 0:
            res.update(ok=False, rewrite_exit=p.returncode, stderr=p.stderr[-1000:])
            out.append(res)
            continue
        try:
            secs, progress = mk.run(spark, spec, new, srcs, work / f"{name}-to{m}-output")
        except Exception as e:  # the restart refused the checkpoint: a finding, reported
            res.update(ok=False, restart_error=str(e)[-2000:])
            out.append(res)
            continue
        data_batches = [pp for pp in progress if pp.get("numInputRows", 0) > 0]
        got_inst = [op["numStateStoreInstances"] for op in data_batches[-1]["stateOperators"]] if data_batches else []
        got = mk.result(spec, initial, mk.read_output(work / f"{name}-to{m}-output"))
        res.update(restart_seconds=round(secs, 1), numStateStoreInstances=got_inst,
                   want_instances=[n // mk.N_PARTITIONS * m for n in inst],
                   output_rows=len(got), reference_rows=len(want), output_equal=got == want)
        if got != want:
            res["first_differences"] = str([x for x in (got if isinstance(got, list) else got.items())
                                            if x not in (want if isinstance(want, list) else want.items())][:3])[:500]
        res["ok"] = bool(data_batches) and got == want and got_inst == res["want_instances"] and res["source_unchanged"]
        out.append(res)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("workdir")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--to", default="8,3")
    a = ap.parse_args()
    work = pathlib.Path(a.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    targets = [int(x) for x in a.to.split(",")]
    spark = mk.session("restart35")
    ok = True
    for name in a.names or ["agg_string", "two_op", "dedup"]:
        for r in check(spark, a.binary, work, name, targets):
            ok &= r["ok"]
            print(json.dumps(r), flush=True)
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
