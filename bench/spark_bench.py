"""The Spark rows of the benchmark (bench/run.sh --only spark; issues 12, 13).

Per size N (--spark-keys, default 1M and 10M):
  - rebucket's rewrite 2 -> 8 of a generated HDFS-backed checkpoint
    (`rebucket generate --engine spark`) beside its durable copy, and one
    Spark restart of the rewritten copy with more input (the proof);
and for the sizes of --spark-peer-keys (default 1M), the peer:
  - a RocksDB checkpoint of the same keys made by the real query in pyspark
    (cached in WORKDIR/spark-rocksdb-N, so a re-run does not rebuild it);
  - Spark 4.3's own `spark._streamingCheckpointManager.repartition(ckpt, 8)`
    on a fresh copy of it: in-session time, wall time including the JVM start,
    peak RSS of the whole process tree (Python driver + JVM), and the bytes the
    checkpoint grows by; then a Spark restart of the result;
  - `rebucket rewrite` of the same RocksDB checkpoint: "not supported yet"
    while rebucket refuses RocksDB (exit 2 naming it), timed and restarted
    once it does not.

Every JVM run and every timed rebucket group takes --jvm-lock (the machine's
shared lock for engine runs) while it runs; waiting for it is not timed.
Without pyspark >= 4.2 (or Java) the Spark runs are skipped with the reason
in the table.
"""

import contextlib
import fcntl
import importlib.metadata
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "..", "interop", "spark", "bench_repartition.py")
MIB = 1 << 20


def log(*a):
    print("bench:", *a, file=sys.stderr, flush=True)


def spark_missing():
    """Why the Spark runs cannot happen here, or None."""
    try:
        v = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return f"pyspark is not installed in {sys.executable} (bench/run.sh installs interop/requirements.txt)"
    major, minor = (int(x) for x in v.split(".")[:2])
    if (major, minor) < (4, 2):
        return f"pyspark {v} has no streaming checkpoint repartition (4.2 or newer needed)"
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        return "no Java on PATH (Spark needs Java 17)"
    return None


def tree_rss_kib(root):
    """Resident memory of root and all its descendants, in KiB."""
    kids, rss = {}, {}
    page = os.sysconf("SC_PAGE_SIZE") // 1024
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            with open(f"/proc/{p}/statm") as f:
                rss[int(p)] = int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(p))
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += kids.get(p, [])
    return total


class SparkBench:
    def __init__(self, bench):
        self.b = bench
        self.a = bench.a
        self.dir = bench.dir
        self.py = sys.executable
        self.missing = spark_missing()
        self.sizes = []  # (section, label, before, after, grown, written, restart)
        self.peer = {}  # keys -> dict(insess, wall, rw_rocks, note)
        self.placeholders = []  # (index in bench.rows, table line) of rows that could not run

    # --- plumbing --------------------------------------------------------

    @contextlib.contextmanager
    def lock(self):
        if not self.a.jvm_lock:
            yield
            return
        with open(self.a.jvm_lock, "a") as f:
            t0 = time.monotonic()
            fcntl.flock(f, fcntl.LOCK_EX)
            if time.monotonic() - t0 > 1:
                log(f"  waited {time.monotonic() - t0:.0f}s for {self.a.jvm_lock}")
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def jvm(self, *args, memory="2g"):
        """Run one bench_repartition.py subcommand (one JVM) under the lock;
        returns (exit code, its JSON line or None, wall s, tree peak KiB, CPU s)."""
        cmd = [self.py, PEER, *map(str, args), "--memory", memory]
        rssf = os.path.join(self.dir, ".rss-jvm")
        with self.lock():
            os.sync()
            t0 = time.perf_counter()
            p = subprocess.Popen(["/usr/bin/time", "-f", "%M %U %S", "-o", rssf] + cmd,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            peak = 0
            # communicate() in a thread would be tidier; the outputs are small,
            # so polling while sampling cannot fill the pipes.
            while p.poll() is None:
                peak = max(peak, tree_rss_kib(p.pid))
                time.sleep(0.2)
            wall = time.perf_counter() - t0
            out, err = p.communicate()
        with open(rssf) as f:
            m, u, s = f.read().split()[-3:]
        res = None
        for line in out.splitlines():
            if line.startswith("{"):
                res = json.loads(line)
        if p.returncode != 0 and res is None:
            log(f"{' '.join(cmd)}: exit {p.returncode}\n{err[-3000:]}")
        return p.returncode, res, wall, max(peak, int(m)), float(u) + float(s)

    def restart(self, *args, memory):
        rc, res, wall, _, _ = self.jvm(*args, memory=memory)
        if res is None:
            return {"ok": False, "error": f"exit {rc}, no result"}
        res["wall"] = wall
        log(f"  restart: {json.dumps(res)}")
        return res

    @staticmethod
    def memory(keys):
        # the HDFS-backed store holds all of a partition's rows on the JVM heap
        return "6g" if keys > 2_000_000 else "2g"

    # --- rows ------------------------------------------------------------

    def rows(self):
        from run import Row, du, human_count, rm, run  # noqa: E402 (run.py imports this module)

        out = []
        for keys in self.a.spark_keys:
            sec = f"spark {human_count(keys)} keys"
            src = os.path.join(self.dir, f"in-spark-{keys}")
            if not os.path.exists(os.path.join(src, "commits")):
                rm(src)
                log(f"generating a Spark checkpoint of {keys:,} keys in {src}")
                run([self.b.bin, "generate", "--engine", "spark", "--keys", str(keys), "--buckets", "2", "--out", src, "-q"],
                    stdout=subprocess.DEVNULL)
            nbytes = du(src)
            dst = os.path.join(self.dir, "out-spark")
            written = []
            with self.lock():
                self.b.warm(src)
                dur = self.b.time(sec, "durable copy of the checkpoint (cp -r + sync)", ["sh", "-c", f"cp -r {src} {dst} && sync"],
                                  setup=lambda: rm(dst), after=lambda: rm(dst), entries=keys, nbytes=nbytes)
                rw = self.b.time(sec, "rebucket rewrite 2 -> 8 (verified)", self.b.rebucket("rewrite", src, "--buckets", "8", "--out", dst),
                                 setup=lambda: rm(dst), after=lambda: (written.append(du(dst)), rm(dst)),
                                 entries=keys, nbytes=nbytes, ref=dur)
            restart = self.reason()
            if restart is None:
                # The proof: Spark restarts rebucket's output with more input.
                run(self.b.rebucket("rewrite", src, "--buckets", "8", "--out", dst), stdout=subprocess.DEVNULL)
                restart = self.restart("restart-generated", dst, "--input", os.path.join(self.dir, "out-spark-restart-input"),
                                       "--keys", keys, "--to", 8, memory=self.memory(keys))
                rm(dst)
            self.sizes.append((sec, "rebucket rewrite 2 -> 8 (a new directory; the source is not touched)",
                               nbytes, statistics.median(written), 0, statistics.median(written), restart))
            if not self.a.keep:
                rm(src)
            out.append((keys, nbytes, dur, rw, None))
            if keys in self.a.spark_peer_keys:
                self.peer_rows(sec, keys, rw)
        return out

    def reason(self):
        return {"skipped": self.missing} if self.missing else None

    def cached_rocksdb(self, keys):
        """WORKDIR/spark-rocksdb-N: the RocksDB checkpoint of the real query
        over keys k0..k<N-1> (input/, checkpoint/, made.json), made once."""
        from run import rm

        d = os.path.join(self.dir, f"spark-rocksdb-{keys}")
        made = os.path.join(d, "made.json")
        version = importlib.metadata.version("pyspark")
        if os.path.exists(made):
            with open(made) as f:
                m = json.load(f)
            if m.get("keys") == keys and m.get("spark") == version:
                log(f"reusing the RocksDB checkpoint of {keys:,} keys in {d} (made in {m['query_seconds']} s)")
                return d, m
        rm(d)
        log(f"making a RocksDB checkpoint of {keys:,} keys with pyspark {version} in {d} (cached for later runs)")
        rc, m, wall, _, _ = self.jvm("make", d, "--keys", keys, "--provider", "rocksdb", memory=self.memory(keys))
        if rc != 0 or m is None:
            raise SystemExit(f"bench: making the RocksDB checkpoint of {keys:,} keys failed (exit {rc})")
        m["wall_seconds"] = round(wall, 1)
        log(f"  made in {wall:.0f}s wall: {json.dumps(m)}")
        with open(made, "w") as f:
            json.dump(m, f)
        return d, m

    def peer_rows(self, sec, keys, rw_hdfs):
        from run import Row, du, rm

        if self.missing:
            self.peer[keys] = {"note": self.missing}
            self.placeholders.append((len(self.b.rows), f"| {sec}: Spark's repartition: skipped ({self.missing}) | | | | | | | | | |"))
            log(f"skipping Spark's repartition at {keys:,} keys: {self.missing}")
            return
        d, made = self.cached_rocksdb(keys)
        ck = os.path.join(d, "checkpoint")
        before = du(ck)
        mem = self.memory(keys)
        info = {"made": made}

        # Durable copy of the RocksDB checkpoint: the reference of a rebucket
        # rewrite of it.
        dst = os.path.join(self.dir, "out-spark-rocksdb")
        with self.lock():
            self.b.warm(ck)
            dur = self.b.time(sec, "durable copy of the RocksDB checkpoint (cp -r + sync)", ["sh", "-c", f"cp -r {ck} {dst} && sync"],
                              setup=lambda: rm(dst), after=lambda: rm(dst), entries=keys, nbytes=before)

        # rebucket on the same RocksDB checkpoint: attempted; a refusal that
        # names RocksDB (exit 2) is "not supported yet", not a failed bench.
        rm(dst)
        p = subprocess.run(self.b.rebucket("rewrite", ck, "--buckets", "8", "--out", dst), capture_output=True, text=True)
        if p.returncode == 2 and "rocksdb" in p.stderr.lower():
            info["rw_rocks"] = None
            msg = p.stderr.strip().splitlines()[-1].removeprefix("rebucket: ")
            info["rw_rocks_note"] = f"not supported yet (exit 2: {msg[:90]}{'...' if len(msg) > 90 else ''})"
            self.placeholders.append((len(self.b.rows), f"| {sec}: rebucket rewrite of the same RocksDB checkpoint 2 -> 8: "
                                                        f"{info['rw_rocks_note']} | | | | | | | | | |"))
            log(f"  rebucket rewrite of the RocksDB checkpoint: {info['rw_rocks_note']}")
        elif p.returncode != 0:
            raise SystemExit(f"bench: rebucket rewrite {ck} --buckets 8: exit {p.returncode}\n{p.stderr}")
        else:
            rm(dst)
            written = []
            with self.lock():
                self.b.warm(ck)
                info["rw_rocks"] = self.b.time(sec, "rebucket rewrite of the same RocksDB checkpoint 2 -> 8 (verified)",
                                               self.b.rebucket("rewrite", ck, "--buckets", "8", "--out", dst),
                                               setup=lambda: rm(dst), after=lambda: (written.append(du(dst)), rm(dst)),
                                               entries=keys, nbytes=before, ref=dur)
            run_ok = subprocess.run(self.b.rebucket("rewrite", ck, "--buckets", "8", "--out", dst), capture_output=True, text=True)
            restart = self.restart("restart", d, "--ckpt", dst, "--to", 8, memory=mem) if run_ok.returncode == 0 else \
                {"ok": False, "error": run_ok.stderr[-500:]}
            rm(dst)
            self.sizes.append((sec, "rebucket rewrite of the RocksDB checkpoint 2 -> 8 (a new directory)",
                               before, statistics.median(written), 0, statistics.median(written), restart))

        # Spark's own repartition, in place on a fresh copy each run.
        peer_ck = os.path.join(self.dir, "out-spark-peer")
        insess, wall, rss, cpu, grown, after, jvm = [], [], [], [], [], [], []
        for i in range(self.a.spark_peer_runs):
            rm(peer_ck)
            shutil.copytree(ck, peer_ck)
            rc, res, w, peak, c = self.jvm("repartition", d, "--ckpt", peer_ck, "--to", 8, memory=mem)
            if rc != 0 or res is None:
                raise SystemExit(f"bench: Spark's repartition of {peer_ck} failed (exit {rc})")
            insess.append(res["repartition_seconds"])
            wall.append(w)
            rss.append(peak)
            cpu.append(c + res.get("jvm_cpu_seconds", 0))
            grown.append(res["grew_by"])
            after.append(res["checkpoint_bytes_after"])
            jvm.append(res["jvm_peak_rss_mib"] or 0)
            log(f"  Spark repartition run {i + 1}/{self.a.spark_peer_runs}: {res['repartition_seconds']:.1f}s in session, "
                f"{w:.1f}s wall, tree peak RSS {peak // 1024} MiB (JVM {res['jvm_peak_rss_mib']} MiB), grew by {res['grew_by']:,} B")
        restart = self.restart("restart", d, "--ckpt", peer_ck, "--to", 8, memory=mem)
        rm(peer_ck)
        note = (f"{self.a.spark_peer_runs} run(s); pyspark {made['spark']}, local[2], driver memory {mem}; "
                f"the JVM alone peaked at {max(jvm)} MiB")
        info["insess"] = Row(sec, "Spark's repartition 2 -> 8, in the session", insess, rss, cpu, keys, before, note=note)
        info["wall"] = Row(sec, "Spark's repartition 2 -> 8, wall incl. Python and JVM start", wall, rss, cpu, keys, before, note=note)
        for r in (info["insess"], info["wall"]):
            self.b.rows.append(r)
        self.sizes.append((sec, "Spark's repartition 2 -> 8 (in place)", before, statistics.median(after),
                           statistics.median(grown), statistics.median(grown), restart))
        info["rw_hdfs"] = rw_hdfs
        self.peer[keys] = info

    def failed(self):
        return any(r is not None and "skipped" not in r and not r.get("ok") for *_, r in self.sizes)

    # --- rendering -------------------------------------------------------

    def render(self, info, rows, elapsed):
        from run import cpu_pressure, human_count

        b = self.b
        hdr = "| operation | median s | min s | max s | CPU s | CPU s/M | CPU s/M before | rows/s | MiB/s | peak RSS MiB | ratio | reference |"
        sep = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        L = [f"Measured {info['date']} on {info['cpu']}: {info['cores']} cores, {info['memory']} memory, {info['go']}; "
             f"load average {info['load']} and CPU pressure {info['cpu_pressure']}% when the run began, {cpu_pressure()}% at its end. "
             f"Inputs: `rebucket generate --engine spark --keys N --buckets 2` (an HDFS-backed checkpoint of a count aggregation "
             f"on a string key, keys k0..kN-1, one state row per key, lz4 deltas) and, for the peer, a RocksDB checkpoint of the "
             f"same keys made by the real query `groupBy(\"k\").count()` in pyspark at 2 partitions (one batch; "
             f"interop/spark/bench_repartition.py). rebucket's rewrite always verifies before publishing. "
             f"rebucket rows: median of {self.a.runs} runs, peak RSS of the process. Spark rows: {self.a.spark_peer_runs} run(s) "
             f"of a fresh JVM on a fresh copy, peak RSS of the whole process tree (Python driver + JVM, sampled every 0.2 s); "
             f"CPU includes the JVM's. The Spark part took {elapsed / 60:.1f} minutes.", "", hdr, sep]
        at = {}
        for i, line in self.placeholders:
            at.setdefault(i, []).append(line)
        for i, r in enumerate(b.rows + [None]):
            L += at.get(i, [])
            if r is not None and r.section.startswith("spark"):
                L.append(b.line(r).replace("| ", f"| {r.section}: ", 1))
        L += ["", "Checkpoint size and the restart that proves each result (Spark restarts it with one more batch, every "
              "10th key again: it must report 8 state store instances, Spark's statestore reader must see every key once "
              "with the expected total count and no row outside pmod(hash(k), 8)):", "",
              "| result | checkpoint MiB before | after | grown by MiB | written MiB | Spark restart |",
              "|---|---:|---:|---:|---:|---|"]
        for sec, what, before, after, grown, written, restart in self.sizes:
            L.append(f"| {sec}: {what} | {before / MIB:.1f} | {after / MIB:.1f} | {grown / MIB:.1f} | {written / MIB:.1f} | "
                     f"{restart_text(restart)} |")
        L += ["", "| target | figure | met |", "|---|---:|---|"]
        for keys, _, dur, rw, _ in rows:
            x = rw.median / dur.median
            L.append(f"| Spark {human_count(keys)} keys: rewrite within 2x of the durable copy | {x:.2f}x | {'yes' if x <= 2 else '**no**'} |")
        for keys, p in sorted(self.peer.items()):
            if "note" in p:
                L.append(f"| Spark {human_count(keys)} keys: rebucket at least 10x faster than Spark's repartition | skipped: {p['note']} | |")
                continue
            rr = p.get("rw_rocks")
            if rr is not None:
                x = rr.median / rr.ref.median
                L.append(f"| Spark {human_count(keys)} keys, RocksDB: rewrite within 2x of the durable copy | {x:.2f}x | {'yes' if x <= 2 else '**no**'} |")
            mine, what = (rr, "its RocksDB rewrite") if rr is not None else (p["rw_hdfs"], "its HDFS-backed rewrite of the same keys; RocksDB not supported yet")
            y = p["insess"].median / mine.median
            yw = p["wall"].median / mine.median
            L.append(f"| Spark {human_count(keys)} keys: rebucket at least 10x faster than Spark's repartition "
                     f"(rebucket wall, {what}; Spark in-session time, wall incl. JVM start in brackets) | "
                     f"{y:.1f}x ({yw:.1f}x) | {'yes' if y >= 10 else '**no**'} |")
        skipped = [k for k in self.a.spark_keys if k not in self.a.spark_peer_keys]
        if skipped:
            L += ["", f"Spark's repartition was not run at {', '.join(human_count(k) for k in skipped)} keys in this run "
                      f"(`--spark-peer-keys`; see the notes above this block)."]
        return "\n".join(L) + "\n"


def restart_text(r):
    if r is None:
        return ""
    if "skipped" in r:
        return f"skipped: {r['skipped']}"
    if not r.get("ok"):
        return f"**failed**: {json.dumps(r)[:300]}"
    return (f"ok: {r['numStateStoreInstances']} instances, {r['keys']:,} keys, total {r['total']:,}, "
            f"{r['misplaced']} misplaced (restart batch {r['restart_seconds']} s, {r['wall']:.0f} s wall)")
