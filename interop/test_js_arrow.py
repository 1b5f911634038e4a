"""JavaScript reads rebucket's Arrow exports: the npm apache-arrow package
(interop/js, installed by scripts/test.sh with `npm ci`) opens the data file
and its per-worker sibling of a default `export --format arrow`, and sees
the rows pyarrow sees. apache-arrow has no zstd codec, so this fails when
the default is compressed."""

import json
import pathlib
import shutil
import subprocess

import pytest

pa = pytest.importorskip("pyarrow")
ipc = pytest.importorskip("pyarrow.ipc")

JS = pathlib.Path(__file__).resolve().parent / "js"


@pytest.fixture(scope="module")
def node():
    path = shutil.which("node")
    if not path:
        pytest.skip("node is not installed")
    if not (JS / "node_modules" / "apache-arrow").is_dir():
        pytest.fail("interop/js/node_modules is missing: run `npm ci` in interop/js (scripts/test.sh does)")
    return path


def read_js(node, *files):
    p = subprocess.run([node, str(JS / "read_arrow.mjs"), *map(str, files)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"node could not read {files}:\n{p.stderr}"
    return json.loads(p.stdout)


@pytest.mark.parametrize("compression", [None, "none"])
def test_js_reads_arrow_export(tmp_path, rebucket, node, compression):
    snap = tmp_path / "snap"
    rebucket("generate", "--out", snap, "--keys", "200", "--sub-keys", "2", "--buckets", "4", "--width", "2")
    out = tmp_path / "x.arrow"
    args = ["export", snap, "--format", "arrow", "--out", out, "--json"]
    if compression:
        args += ["--compression", compression]
    res = json.loads(rebucket(*args).stdout)
    workers = pathlib.Path(res["worker_state_file"])
    assert workers.exists()

    got = read_js(node, out, workers)
    data, ws = got[str(out)], got[str(workers)]

    manifest = json.loads((snap / "MANIFEST.json").read_text())
    total = sum(st["entries"] for st in manifest["states"])
    assert data["num_rows"] == total == res["rows"]
    assert ws["num_rows"] == res["worker_state_items"] > 0
    assert "rebucket.manifest" in data["metadata_keys"]

    # The decoded values agree with pyarrow's reading of the same files.
    want = ipc.open_file(str(out)).read_all().slice(0, 5).to_pylist()
    assert len(data["rows"]) == len(want) == 5
    for js_row, py_row in zip(data["rows"], want):
        for col in ("bucket", "step", "state", "key_utf8", "value_int64"):
            pv = py_row[col]
            # int64 comes to JavaScript as BigInt (printed as a string).
            assert js_row[col] == (str(pv) if col == "value_int64" and pv is not None else pv), (col, js_row, py_row)
    wwant = ipc.open_file(str(workers)).read_all().slice(0, 5).to_pylist()
    assert [(r["step"], r["name"], r["worker"]) for r in ws["rows"]] == [(r["step"], r["name"], r["worker"]) for r in wwant]
