"""rebucket benchmark suite (issue 7). Run it through bench/run.sh.

Generates its inputs with `rebucket generate`, warms the page cache (every
input is read once with cat before its rows are timed), runs every row
--runs times (at least 3) and reports the median, min and max of the
elapsed time, with peak resident memory from /usr/bin/time. Each row is set
beside its reference measured in the same run: the durable copy (cp -r then
sync) for rewrites and load, reading the inputs once (cat to /dev/null) for
verify, export and import, and a DuckDB rebucketing of the same entries.

The table goes between the markers in BENCHMARKS.md (default sizes) or to
WORKDIR/BENCHMARKS.quick.md (--quick), and the raw figures to
WORKDIR/results.json.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import spark_bench

BEGIN = "<!-- bench:begin (written by bench/run.sh; edit outside the markers) -->"
END = "<!-- bench:end -->"
FLINK_BEGIN = "<!-- bench-flink:begin (written by bench/run.sh; edit outside the markers) -->"
FLINK_END = "<!-- bench-flink:end -->"
SPARK_BEGIN = "<!-- bench-spark:begin (written by bench/run.sh; edit outside the markers) -->"
SPARK_END = "<!-- bench-spark:end -->"
MIB = 1 << 20
# What `rebucket rewrite --help` states as the fixed overhead above --memory.
REWRITE_OVERHEAD = 96 * MIB


def log(*a):
    print("bench:", *a, file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def rm(*paths):
    for p in paths:
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.lexists(p):
            os.remove(p)
        # export writes its per-worker state beside the Parquet file.
        for side in (p + ".workers.parquet", p.removesuffix(".parquet") + ".workers.parquet"):
            if os.path.lexists(side):
                os.remove(side)


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def files_of(path):
    if os.path.isfile(path):
        return [path]
    out = []
    for root, _, files in os.walk(path):
        out += [os.path.join(root, f) for f in sorted(files)]
    return out


class Snap:
    """A generated input: its directory, entries and data bytes on disk."""

    def __init__(self, path):
        self.path = path
        with open(os.path.join(path, "MANIFEST.json")) as f:
            m = json.load(f)
        self.entries = sum(f["entries"] for f in m["files"])
        self.data_bytes = sum(f["size"] for f in m["files"])
        self.logical_bytes = sum(m["bucket_bytes"])
        self.bytes = du(path)


class Row:
    def __init__(self, section, name, times, rss_kb, cpu, entries=None, nbytes=None, ref=None, note=""):
        self.section, self.name = section, name
        self.times, self.rss_kb, self.cpu = times, rss_kb, cpu
        self.entries, self.nbytes, self.ref, self.note = entries, nbytes, ref, note

    @property
    def median(self):
        return statistics.median(self.times)

    def as_dict(self):
        return {
            "section": self.section, "name": self.name, "seconds": self.times,
            "median_seconds": self.median, "cpu_seconds": self.cpu, "peak_rss_bytes": max(self.rss_kb) * 1024,
            "entries": self.entries, "bytes": self.nbytes,
            "reference": self.ref.name if self.ref else None, "note": self.note,
        }


class Bench:
    def __init__(self, args):
        self.a = args
        self.bin = args.bin
        self.dir = args.workdir
        self.rows = []
        self.by = {}
        self.threads = os.cpu_count() or 1
        self.before, self.before_info = {}, ""
        if args.before:
            with open(args.before) as f:
                prev = json.load(f)
            self.before = {(r["section"], r["name"]): r for r in prev["rows"]}
            mi = prev.get("machine", {})
            self.before_info = f"measured {mi.get('date', '?')}, load average {mi.get('load', '?')}"

    # --- measuring -----------------------------------------------------

    def warm(self, *paths):
        """Reads the inputs once so that every run finds them in the page
        cache (the first run would otherwise pay for the disk)."""
        for p in paths:
            for f in files_of(p):
                with open(f, "rb") as fh:
                    while fh.read(8 << 20):
                        pass

    def time(self, section, name, cmd, *, setup=None, after=None, entries=None, nbytes=None, ref=None, note="", runs=None):
        runs = runs or self.a.runs
        times, rss, cpu = [], [], []
        for i in range(runs):
            if setup:
                setup()
            # Dirty pages of the previous run (or of other programs) are
            # written out before the clock starts, not charged to this run.
            os.sync()
            rssf = os.path.join(self.dir, ".rss")
            t0 = time.perf_counter()
            p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", rssf] + cmd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            el = time.perf_counter() - t0
            if p.returncode != 0:
                log(f"{name}: {' '.join(cmd)} failed (exit {p.returncode}):\n{p.stderr}")
                raise SystemExit(4)
            with open(rssf) as f:
                m, u, s = f.read().split()[-3:]
            rss.append(int(m))
            cpu.append(float(u) + float(s))
            times.append(el)
            log(f"  {name} run {i + 1}/{runs}: {el:.2f}s (CPU {cpu[-1]:.2f}s), peak RSS {rss[-1] // 1024} MiB")
            if after:
                after()
        r = Row(section, name, times, rss, cpu, entries, nbytes, ref, note)
        self.rows.append(r)
        self.by[(section, name)] = r
        return r

    # --- inputs --------------------------------------------------------

    def generate(self, entries, mapping):
        path = os.path.join(self.dir, f"in-{mapping}128-{entries}-v{self.a.value_size}")
        if not os.path.exists(os.path.join(path, "MANIFEST.json")):
            rm(path)
            log(f"generating {entries:,} entries ({mapping}, 128 buckets) in {path}")
            run([self.bin, "generate", "--out", path, "--buckets", "128", "--width", "4",
                 "--mapping", mapping, "--entries", str(entries), "--value-size", str(self.a.value_size), "-q"],
                stdout=subprocess.DEVNULL)
        return Snap(path)

    def rebucket(self, *args):
        return [self.bin, *args, "-q"]

    # --- rows ----------------------------------------------------------

    def copy_rows(self, section, s, label):
        dst = os.path.join(self.dir, "out-copy")
        self.warm(s.path)
        cat = self.time(section, f"cat {label} > /dev/null", ["sh", "-c", f"cat {files_of_arg(s.path)} > /dev/null"],
                        entries=s.entries, nbytes=s.bytes)
        dur = self.time(section, f"durable copy of {label} (cp -r + sync)", ["sh", "-c", f"cp -r {s.path} {dst} && sync"],
                        setup=lambda: rm(dst), after=lambda: rm(dst), entries=s.entries, nbytes=s.bytes)
        pc = self.time(section, f"page-cache copy of {label} (cp -r)", ["cp", "-r", s.path, dst],
                       setup=lambda: rm(dst), after=lambda: rm(dst), entries=s.entries, nbytes=s.bytes, ref=dur)
        return cat, dur, pc

    def rewrite(self, section, name, s, buckets, ref, memory=None, verify=False, mapping=None):
        dst = os.path.join(self.dir, "out-rewrite")
        cmd = self.rebucket("rewrite", s.path, "--buckets", str(buckets), "--out", dst)
        if not verify:
            cmd.append("--no-verify")
        if memory:
            cmd += ["--memory", str(memory)]
        if mapping:
            cmd += ["--mapping", mapping]
        note = f"--memory {memory // MIB} MiB" if memory else ""
        self.warm(s.path)
        seen = {}

        def after():
            # The output's file count, and what spilled (a --json dry
            # run is not enough: spilling is measured, not planned).
            with open(os.path.join(dst, "MANIFEST.json")) as f:
                seen["files"] = len(json.load(f)["files"])
            rm(dst)

        r = self.time(section, name, cmd, setup=lambda: rm(dst), after=after,
                      entries=s.entries, nbytes=s.data_bytes, ref=ref, note=note)
        if memory:
            # One more run with --json for the spilled bytes (not timed).
            rm(dst)
            p = subprocess.run(cmd + ["--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            if p.returncode == 0:
                sp = json.loads(p.stdout)["rewrite"]["spilled_bytes"]
                r.note += f", spilled {sp / MIB:.0f} MiB"
            rm(dst)
        r.note = (r.note + ", " if r.note else "") + f"{seen.get('files', '?')} files"
        return r

    def main(self):
        a = self.a
        os.makedirs(self.dir, exist_ok=True)
        started = time.time()
        info = machine()
        log(f"work directory {self.dir}; {info['cores']} cores, {info['memory']}, {info['go']}")

        if a.only == "spark":
            rows = self.spark_rows()
            md = self.render_spark(info, rows, time.time() - started)
            out = a.out or ("BENCHMARKS.md" if not a.quick else os.path.join(self.dir, "BENCHMARKS.quick.md"))
            splice(out, md, SPARK_BEGIN, SPARK_END)
            print(md)
            if self.spark.failed():
                raise SystemExit("bench: a Spark restart check failed (see the table)")
            return
        if a.only == "flink":
            flink = self.flink_rows()
            md = self.render_flink(info, flink, time.time() - started)
            out = a.out or ("BENCHMARKS.md" if not a.quick else os.path.join(self.dir, "BENCHMARKS.quick.md"))
            splice(out, md, FLINK_BEGIN, FLINK_END)
            print(md)
            return

        S = self.generate(a.entries, "mod")
        R = self.generate(a.entries, "range")
        lbl = f"{human_count(S.entries)} entries"

        # 1. The copy limit.
        cat_s, dur_s, _ = self.copy_rows("copy", S, f"mod input ({lbl})")
        _, dur_r, _ = self.copy_rows("copy", R, f"range input ({lbl})")

        # 2. Rewrites.
        sec = "rewrite"
        snap_mem = max(S.data_bytes, S.logical_bytes)
        mem_in = (2 * snap_mem // MIB + 64) * MIB
        mem_spill = spill_memory(S)
        split = self.rewrite(sec, "split mod 128 -> 1024", S, 1024, dur_s)
        self.rewrite(sec, "split mod 128 -> 1024, verified (default)", S, 1024, dur_s, verify=True)
        merge = self.rewrite(sec, "merge range 128 -> 1000", R, 1000, dur_r)
        shuf = self.rewrite(sec, "shuffle in memory mod 128 -> 1000", S, 1000, dur_s, memory=mem_in)
        spill = self.rewrite(sec, "shuffle spilling mod 128 -> 1000", S, 1000, dur_s, memory=mem_spill)
        self.rewrite(sec, "split mod 128 -> 32768", S, 32768, dur_s)

        # 3. The DuckDB peer on the same entries (the export is setup, not timed).
        pq = os.path.join(self.dir, "in.parquet")
        if not os.path.exists(pq):
            log("exporting the mod input to Parquet for the DuckDB peer")
            run(self.rebucket("export", S.path, "--out", pq, "--compression", "snappy"), stdout=subprocess.DEVNULL)
        peer_out = os.path.join(self.dir, "out-peer.parquet")
        self.warm(pq)
        peer = self.time("peer", "DuckDB: hash, sort, write Parquet (1024 buckets)",
                         [sys.executable, os.path.join(os.path.dirname(__file__), "duckdb_peer.py"), pq, peer_out, "1024", str(self.threads)],
                         setup=lambda: rm(peer_out), after=lambda: rm(peer_out),
                         entries=S.entries, nbytes=os.path.getsize(pq),
                         note=f"input Parquet {os.path.getsize(pq) / MIB:.0f} MiB, snappy; DuckDB {self.threads} threads")

        # 4. verify --against, export, import, load.
        sec = "tools"
        target = os.path.join(self.dir, "split-target")
        if not os.path.exists(os.path.join(target, "MANIFEST.json")):
            rm(target)
            run(self.rebucket("rewrite", S.path, "--buckets", "1024", "--out", target, "--no-verify", "--for-width", "40"), stdout=subprocess.DEVNULL)
        T = Snap(target)
        self.warm(S.path, T.path)
        cat_st = self.time(sec, "cat both snapshots > /dev/null", ["sh", "-c", f"cat {files_of_arg(S.path)} {files_of_arg(T.path)} > /dev/null"],
                           entries=S.entries + T.entries, nbytes=S.bytes + T.bytes)
        self.time(sec, "verify 1024-bucket split --against the source", self.rebucket("verify", T.path, "--against", S.path),
                  entries=S.entries + T.entries, nbytes=S.bytes + T.bytes, ref=cat_st)
        ex = os.path.join(self.dir, "out-export.parquet")
        self.warm(S.path)
        self.time(sec, "export parquet (zstd, default)", self.rebucket("export", S.path, "--out", ex),
                  setup=lambda: rm(ex), after=lambda: rm(ex), entries=S.entries, nbytes=S.bytes, ref=cat_s)
        cat_pq = self.time(sec, "cat the Parquet export > /dev/null", ["cat", pq], entries=S.entries, nbytes=os.path.getsize(pq))
        imp = os.path.join(self.dir, "out-import")
        self.time(sec, "import parquet -> 1024 buckets (--no-verify; default --memory, sorts in memory)",
                  self.rebucket("import", pq, "--buckets", "1024", "--out", imp, "--no-verify"),
                  setup=lambda: rm(imp), after=lambda: rm(imp), entries=S.entries, nbytes=os.path.getsize(pq), ref=cat_pq)
        imp_mem = max(16 * MIB, (os.path.getsize(pq) // 4 // MIB) * MIB)
        self.time(sec, f"import parquet -> 1024 buckets (--no-verify; --memory {imp_mem // MIB} MiB, spills)",
                  self.rebucket("import", pq, "--buckets", "1024", "--out", imp, "--no-verify", "--memory", str(imp_mem)),
                  setup=lambda: rm(imp), after=lambda: rm(imp), entries=S.entries, nbytes=os.path.getsize(pq), ref=cat_pq)
        ld = os.path.join(self.dir, "out-load")
        self.warm(S.path)
        self.time(sec, "load at width 40 (Pebble stores)", self.rebucket("load", S.path, "--width", "40", "--into", ld),
                  setup=lambda: rm(ld), after=lambda: rm(ld), entries=S.entries, nbytes=S.bytes, ref=cat_s,
                  note=f"vs durable copy: see targets")
        self.warm(T.path)
        self.time(sec, "load 1024-bucket split (--for-width 40) at width 40", self.rebucket("load", T.path, "--width", "40", "--into", ld),
                  setup=lambda: rm(ld), after=lambda: rm(ld), entries=T.entries, nbytes=T.bytes, ref=cat_s,
                  note="files cut for 40 workers: every file ingested whole")
        rm(target)

        # 5. Scaling.
        scale = []
        for n in a.scale:
            if n == a.entries:
                X = S
                sp, sh = split, spill
            else:
                need = self.estimate_bytes(n, S) * 4
                free = shutil.disk_usage(self.dir).free
                if free < need:
                    log(f"skipping {n:,} entries: {free / MIB:.0f} MiB free in {self.dir}, about {need / MIB:.0f} MiB needed")
                    continue
                X = self.generate(n, "mod")
                sec = f"scale {human_count(X.entries)}"
                sp = self.rewrite(sec, "split mod 128 -> 1024", X, 1024, None)
                sh = self.rewrite(sec, "shuffle spilling mod 128 -> 1000", X, 1000, None,
                                  memory=spill_memory(X))
                if not a.keep:
                    rm(X.path)
            scale.append((X, sp, sh))

        if not a.keep:
            rm(S.path, R.path, pq)
        flink_started = time.time()
        flink = self.flink_rows() if a.flink_keys else []
        flink_md = self.render_flink(info, flink, time.time() - flink_started) if flink else ""
        elapsed = time.time() - started
        md = self.render(info, S, scale, peer, elapsed, mem_in, mem_spill)
        with open(os.path.join(self.dir, "results.json"), "w") as f:
            json.dump({"machine": info, "rows": [r.as_dict() for r in self.rows], "elapsed_seconds": elapsed}, f, indent=1)
        if a.quick and not a.out:
            out = os.path.join(self.dir, "BENCHMARKS.quick.md")
            with open(out, "w") as f:
                f.write(md + flink_md)
        else:
            out = a.out or "BENCHMARKS.md"
            splice(out, md)
            if flink_md:
                splice(out, flink_md, FLINK_BEGIN, FLINK_END)
        print(md)
        log(f"wrote {out} in {elapsed / 60:.1f} minutes")

    def flink_rows(self):
        """Flink savepoints of the probe job (generate --engine flink, the
        layout real Flink 2.3.0 writes, proved by interop/test_flink.py):
        rebucket's rewrite 8 -> 128 (verified before publishing, as always
        for Flink) beside the durable copy of the same savepoint and beside
        the State Processor API rewrite of it (interop/flink SpaRewrite)."""
        out = []
        probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop", "flink", "probe.sh")
        for keys in self.a.flink_keys:
            sec = f"flink {human_count(keys)} keys"
            src = os.path.join(self.dir, f"in-flink-{keys}")
            if not os.path.exists(os.path.join(src, "_metadata")):
                rm(src)
                log(f"generating a Flink savepoint of {keys:,} keys per keyed operator in {src}")
                run([self.bin, "generate", "--engine", "flink", "--keys", str(keys), "--buckets", "8", "--width", "2",
                     "--out", src, "-q"], stdout=subprocess.DEVNULL)
            nbytes = du(src)
            entries = 5 * keys  # count, tags, events and two timers per key
            self.warm(src)
            dst = os.path.join(self.dir, "out-flink")
            dur = self.time(sec, "durable copy of the savepoint (cp -r + sync)", ["sh", "-c", f"cp -r {src} {dst} && sync"],
                            setup=lambda: rm(dst), after=lambda: rm(dst), entries=entries, nbytes=nbytes)
            rw = self.time(sec, "rebucket rewrite 8 -> 128 (verified)", self.rebucket("rewrite", src, "--buckets", "128", "--out", dst),
                           setup=lambda: rm(dst), after=lambda: rm(dst), entries=entries, nbytes=nbytes, ref=dur)
            spa = None
            if keys <= self.a.spa_max_keys:
                spa = self.time(sec, "State Processor API rewrite 8 -> 128 (Flink 2.3.0, parallelism 2)",
                                [probe, "SpaRewrite", src, dst, "128", "hashmap", "2"],
                                setup=lambda: rm(dst), after=lambda: rm(dst), entries=entries, nbytes=nbytes, ref=dur,
                                runs=1, note="one run; JVM start included")
            out.append((keys, nbytes, dur, rw, spa))
            if not self.a.keep:
                rm(src)
        return out

    def estimate_bytes(self, n, s):
        return int(s.bytes * n / max(s.entries, 1))

    # --- the table -----------------------------------------------------

    def render(self, info, S, scale, peer, elapsed, mem_in, mem_spill):
        end_pressure = cpu_pressure()
        L = []
        L.append(f"Measured {info['date']} on {info['cpu']}: {info['cores']} cores, {info['memory']} memory, "
                 f"{info['go']}, {info['kernel']}; load average {info['load']} and CPU pressure {info['cpu_pressure']}% "
                 f"(tasks waiting for a core, /proc/pressure/cpu avg60) when the run began, {end_pressure}% at its end. "
                 f"Every figure is the median of {self.a.runs} runs (min and max beside it; CPU s is the median user+sys time, "
                 f"which other load on the machine does not inflate); "
                 f"the page cache was warm: every input was read once (cat) before its rows were timed, "
                 f"and `sync` ran before each run so that no earlier dirty page is charged to it. "
                 f"Inputs: `rebucket generate --buckets 128 --width 4 --value-size {self.a.value_size} --entries N` "
                 f"(three keyed states: value, map, list; snappy SSTables); the main input holds {S.entries:,} entries, "
                 f"{S.data_bytes / MIB:.0f} MiB of data files ({S.logical_bytes / MIB:.0f} MiB logical). "
                 f"Rewrites run at the default parallelism (all cores) with `--no-verify` except the row that says verified; "
                 f"shuffle in memory gets `--memory {mem_in // MIB}MiB` (above the snapshot), spilling `--memory {mem_spill // MIB}MiB` "
                 f"(a quarter of one gcd group's spill size, so that it really spills; the row shows the bytes spilled). "
                 f"CPU s/M is CPU seconds per million entries{self.before_note()}. MB/s is MiB of input (data files on disk for rewrites, the whole directory otherwise) per second. "
                 f"The whole run took {elapsed / 60:.1f} minutes.")
        L.append("")
        hdr = "| operation | median s | min s | max s | CPU s | CPU s/M | CPU s/M before | entries/s | MiB/s | peak RSS MiB | ratio | reference |"
        sep = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        titles = {"copy": "The copy limit", "rewrite": "Rewrites (ratio to the durable copy of the same input)",
                  "peer": "Query-engine peer", "tools": "verify, export, import, load (ratio to reading the inputs once)"}
        for sec in ("copy", "rewrite", "peer", "tools"):
            L += ["", f"#### {titles[sec]}", "", hdr, sep]
            for r in self.rows:
                if r.section != sec:
                    continue
                L.append(self.line(r))
        L += ["", "#### Rewrites against the DuckDB peer", "",
              "| rewrite | rewrite median s | DuckDB median s | rewrite / DuckDB |", "|---|---:|---:|---:|"]
        for r in self.rows:
            if r.section == "rewrite":
                L.append(f"| {r.name} | {r.median:.2f} | {peer.median:.2f} | {r.median / peer.median:.2f} |")
        L += ["", "#### Scaling (split mod 128 -> 1024; shuffle spilling mod 128 -> 1000 with --memory a quarter of a gcd group)", "",
              "| entries | data MiB | split s (min-max) | split µs/entry | split peak RSS MiB | spill s (min-max) | spill µs/entry | spill peak RSS MiB | spill --memory + 96 MiB |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for X, sp, sh in scale:
            mem = spill_memory(X)
            L.append(f"| {X.entries:,} | {X.data_bytes / MIB:.0f} | {sp.median:.2f} ({min(sp.times):.2f}-{max(sp.times):.2f}) | "
                     f"{sp.median / X.entries * 1e6:.2f} | {max(sp.rss_kb) / 1024:.0f} | "
                     f"{sh.median:.2f} ({min(sh.times):.2f}-{max(sh.times):.2f}) | {sh.median / X.entries * 1e6:.2f} | "
                     f"{max(sh.rss_kb) / 1024:.0f} | {(mem + REWRITE_OVERHEAD) / MIB:.0f} |")
        L += ["", "#### Targets", "", "| target | figure | met |", "|---|---:|---|"]
        for t, fig, ok in self.targets(peer, scale):
            L.append(f"| {t} | {fig} | {'yes' if ok else '**no**'} |")
        return "\n".join(L) + "\n"

    def line(self, r):
        eps = f"{r.entries / r.median:,.0f}" if r.entries else ""
        mbs = f"{r.nbytes / MIB / r.median:.1f}" if r.nbytes else ""
        ratio = f"{r.median / r.ref.median:.2f}x" if r.ref else ""
        ref = r.ref.name if r.ref else ""
        name = r.name + (f" ({r.note})" if r.note else "")
        cpu = statistics.median(r.cpu)
        per = f"{cpu / r.entries * 1e6:.3f}" if r.entries else ""
        b = self.before.get((r.section, r.name))
        before = f"{statistics.median(b['cpu_seconds']) / b['entries'] * 1e6:.3f}" if b and b.get("entries") else ""
        return (f"| {name} | {r.median:.2f} | {min(r.times):.2f} | {max(r.times):.2f} | {cpu:.2f} | {per} | {before} | {eps} | {mbs} | "
                f"{max(r.rss_kb) / 1024:.0f} | {ratio} | {ref} |")

    def before_note(self):
        if not self.before:
            return ""
        return f"; the before column is the same row of {self.a.before} (an earlier run, {self.before_info})"

    def targets(self, peer, scale):
        out = []
        rw = {r.name: r for r in self.rows if r.section == "rewrite"}
        goals = [("split mod 128 -> 1024", 2.0), ("merge range 128 -> 1000", 2.5),
                 ("shuffle in memory mod 128 -> 1000", 3.0), ("shuffle spilling mod 128 -> 1000", 4.0)]
        for name, lim in goals:
            r = rw[name]
            x = r.median / r.ref.median
            out.append((f"{name} within {lim}x of the durable copy", f"{x:.2f}x", x <= lim))
        for name, _ in goals:
            r = rw[name]
            x = r.median / peer.median
            out.append((f"{name} faster than DuckDB", f"{x:.2f}x DuckDB's time", x < 1))
        if len(scale) >= 2:
            (x0, sp0, sh0), (x1, sp1, sh1) = scale[0], scale[-1]
            for what, a, b in (("split", sp0, sp1), ("shuffle spilling", sh0, sh1)):
                pa, pb = a.median / x0.entries, b.median / x1.entries
                out.append((f"{what}: time per entry at {human_count(x1.entries)} within 20% of {human_count(x0.entries)}",
                            f"{pb * 1e6:.2f} vs {pa * 1e6:.2f} µs ({pb / pa - 1:+.0%})", pb <= 1.2 * pa))
            for X, sp, sh in scale:
                mem = spill_memory(X)
                rss = max(sh.rss_kb) * 1024
                out.append((f"shuffle spilling peak RSS at {human_count(X.entries)} within --memory + 96 MiB",
                            f"{rss / MIB:.0f} MiB vs {(mem + REWRITE_OVERHEAD) / MIB:.0f} MiB", rss <= mem + REWRITE_OVERHEAD))
        tools = {r.name: r for r in self.rows if r.section == "tools"}
        v = tools["verify 1024-bucket split --against the source"]
        out.append(("verify --against within 3x of cat of both snapshots", f"{v.median / v.ref.median:.2f}x", v.median <= 3 * v.ref.median))
        ld = tools["load at width 40 (Pebble stores)"]
        dur = next(r for r in self.rows if r.section == "copy" and r.name.startswith("durable copy of mod"))
        out.append(("load at width 40 within 1.5x of the durable copy", f"{ld.median / dur.median:.2f}x", ld.median <= 1.5 * dur.median))
        lc = tools["load 1024-bucket split (--for-width 40) at width 40"]
        out.append(("load at a width the files were cut for (40) within 1.5x of the durable copy", f"{lc.median / dur.median:.2f}x", lc.median <= 1.5 * dur.median))
        return out


    def spark_rows(self):
        """The Spark checkpoint rows and Spark's own repartition as the peer
        (bench/spark_bench.py)."""
        self.spark = spark_bench.SparkBench(self)
        return self.spark.rows()

    def render_flink(self, info, flink, elapsed):
        hdr = "| operation | median s | min s | max s | CPU s | CPU s/M | CPU s/M before | entries/s | MiB/s | peak RSS MiB | ratio | reference |"
        sep = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        L = [f"Measured {info['date']} on {info['cpu']}: {info['cores']} cores, {info['memory']} memory, {info['go']}; "
             f"load average {info['load']} and CPU pressure {info['cpu_pressure']}% when the run began, {cpu_pressure()}% at its end. "
             f"Inputs: `rebucket generate --engine flink --keys N --buckets 8 --width 2` (the probe job of interop/flink: "
             f"per key a String-keyed ValueState, a Long-keyed MapState and ListState entry and two event-time timers, "
             f"so 5 entries per key; two keyed-state files per operator). rebucket's rewrite always verifies before publishing. "
             f"Median of {self.a.runs} runs except the State Processor API (one run). The Flink part took {elapsed / 60:.1f} minutes.",
             "", hdr, sep]
        for r in self.rows:
            if r.section.startswith("flink"):
                L.append(self.line(r).replace("| ", f"| {r.section}: ", 1))
        L += ["", "| target | figure | met |", "|---|---:|---|"]
        for t, fig, ok in self.flink_targets(flink):
            L.append(f"| {t} | {fig} | {'yes' if ok else '**no**'} |")
        return "\n".join(L) + "\n"

    def render_spark(self, info, rows, elapsed):
        return self.spark.render(info, rows, elapsed)

    def flink_targets(self, flink):
        out = []
        for keys, _, dur, rw, spa in flink:
            x = rw.median / dur.median
            out.append((f"Flink {human_count(keys)} keys: rewrite within 2x of the durable copy", f"{x:.2f}x", x <= 2))
            if spa:
                y = spa.median / rw.median
                out.append((f"Flink {human_count(keys)} keys: at least 50x faster than the State Processor API", f"{y:.1f}x", y >= 50))
        return out


def files_of_arg(path):
    # Data files and manifest: a shell glob keeps the command line short.
    return f"{path}/MANIFEST.json {path}/data/* {path}/workers/*"


def human_count(n):
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if n >= div:
            v = n / div
            return f"{v:.0f}{unit}" if abs(v - round(v)) < 0.05 else f"{v:.1f}{unit}"
    return str(n)


def machine():
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    go = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(), "memory": f"{mem / (1 << 30):.1f} GiB", "cpu": cpu, "go": go,
        "kernel": "Linux " + platform.release(), "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "cpu_pressure": cpu_pressure(),
    }


def cpu_pressure():
    """The share of the last 60 s in which some runnable task waited for a
    CPU (/proc/pressure/cpu): other programs competing for the cores."""
    try:
        with open("/proc/pressure/cpu") as f:
            for tok in f.readline().split():
                if tok.startswith("avg60="):
                    return float(tok[6:])
    except OSError:
        pass
    return None


def splice(path, md, begin=BEGIN, end=END):
    """Replaces the text between the markers of path (appending the markers
    if the file has none), so the prose around the table survives."""
    body = f"{begin}\n{md}{end}\n"
    try:
        with open(path) as f:
            old = f.read()
    except FileNotFoundError:
        old = "# Benchmarks\n\n"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        _, tail = rest.split(end, 1)
        new = head + body + tail.lstrip("\n")
    else:
        new = old.rstrip("\n") + "\n\n" + body
    with open(path, "w") as f:
        f.write(new)


def spill_memory(X):
    """The --memory of the spilling shuffle rows: a quarter of one of the
    8 gcd(128, 1000) groups' spill size (entries plus 16 bytes of framing
    each), so that every owner's share of a group exceeds its sorter budget
    and the row really spills."""
    return max(16 * MIB, ((X.logical_bytes + 16 * X.entries) // 8 // 4 // MIB) * MIB)


def parse_count(s):
    s = s.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(s[-1:], 1)
    return int(float(s.rstrip("km")) * mult)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", required=True, help="the rebucket binary")
    p.add_argument("--quick", action="store_true", help="small sizes, under 2 minutes; leaves BENCHMARKS.md alone")
    p.add_argument("--runs", type=int, default=3, help="runs per row (at least 3)")
    p.add_argument("--entries", type=parse_count, help="entries of the main input (default 10M, quick 200k)")
    p.add_argument("--scale", help="comma-separated sizes of the scaling rows (default 1M,10M,30M; quick 100k,200k,400k)")
    p.add_argument("--value-size", type=int, default=64, help="mean value size of the generated entries")
    p.add_argument("--workdir", help="where inputs and outputs go (default: a new directory under $TMPDIR)")
    p.add_argument("--out", help="markdown file to splice the table into (default BENCHMARKS.md; with --quick, WORKDIR/BENCHMARKS.quick.md)")
    p.add_argument("--only", choices=["flink", "spark"], help="run only these rows (the Flink savepoint or Spark checkpoint rows, into their own block)")
    p.add_argument("--spark-keys", default="1M,10M", help="keys of the Spark rows (default 1M,10M)")
    p.add_argument("--spark-peer-keys", default="1M",
                   help="sizes (among --spark-keys) at which Spark's own repartition runs as the peer (default 1M; "
                        "1M,10M adds 10M, about 12 minutes more the first time and 6 once its RocksDB checkpoint is cached; 0 skips the peer)")
    p.add_argument("--spark-peer-runs", type=int, default=1, help="runs of Spark's repartition per size (default 1; a fresh JVM each)")
    p.add_argument("--jvm-lock", default=os.environ.get("REBUCKET_JVM_LOCK"),
                   help="a lock file (flock) held during every JVM run and every timed Spark group, so that engine runs "
                        "of other programs sharing the machine wait (default $REBUCKET_JVM_LOCK)")
    p.add_argument("--flink-keys", help="keys per keyed operator of the Flink rows (default 1M,10M; quick 100k; 0 skips them)")
    p.add_argument("--spa-max-keys", type=parse_count, default=1_000_000,
                   help="largest savepoint the State Processor API peer rewrites (default 1M; it needs minutes per million keys)")
    p.add_argument("--before", help="results.json of an earlier run (e.g. of the previous binary): its CPU s per million entries beside each row")
    p.add_argument("--keep", action="store_true", help="keep the generated inputs (reused by the next run with the same --workdir)")
    a = p.parse_args()
    if a.runs < 3:
        p.error("--runs: at least 3")
    if a.entries is None:
        a.entries = 200_000 if a.quick else 10_000_000
    if a.scale is None:
        a.scale = "100k,200k,400k" if a.quick else "1M,10M,30M"
    a.scale = [parse_count(x) for x in a.scale.split(",")]
    if a.flink_keys is None:
        a.flink_keys = "100k" if a.quick else "1M,10M"
    a.flink_keys = [k for k in (parse_count(x) for x in a.flink_keys.split(",")) if k > 0]
    a.spark_keys = [k for k in (parse_count(x) for x in a.spark_keys.split(",")) if k > 0]
    a.spark_peer_keys = [k for k in (parse_count(x) for x in a.spark_peer_keys.split(",")) if k > 0]
    if a.workdir is None and a.only == "spark":
        # a fixed place, so that the RocksDB checkpoints Spark made (minutes
        # each) are found again by the next run
        a.workdir = os.path.join(tempfile.gettempdir(), "rebucket-bench-spark")
    if a.workdir is None:
        a.workdir = tempfile.mkdtemp(prefix="rebucket-bench-")
    a.workdir = os.path.abspath(a.workdir)
    a.bin = os.path.abspath(a.bin)
    try:
        Bench(a).main()
    finally:
        if not a.keep:
            for d in os.listdir(a.workdir) if os.path.isdir(a.workdir) else []:
                if d.startswith(("in-", "in.parquet", "out-", "split-target")):
                    rm(os.path.join(a.workdir, d))


if __name__ == "__main__":
    main()
