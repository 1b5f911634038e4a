"""Cross-check of the FORMAT.md test vectors against an independent
implementation: Python's xxhash (the reference C xxHash) for the hashes and
checksums, and the mappings, key encoding, item encoding and worker
assignment re-implemented here from the text of FORMAT.md, not from the Go
code. snapshotfmt/vectors_test.go checks the same lines against Go."""

import json
import pathlib
import struct

import pytest
import xxhash

FORMAT_MD = pathlib.Path(__file__).resolve().parent.parent / "snapshotfmt" / "FORMAT.md"


def blocks():
    """Lines of each ```vectors-* fenced block, split into fields."""
    out, cur = {}, None
    for raw in FORMAT_MD.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if cur is None and line.startswith("```vectors-"):
            cur = line[3:]
            out[cur] = []
        elif cur is not None and line == "```":
            cur = None
        elif cur is not None and line and not line.startswith("#"):
            out[cur].append(line.split())
    assert cur is None, f"FORMAT.md: block {cur} is not closed"
    return out


BLOCKS = blocks()


def parse_bytes(s):
    if s == "-":
        return b""
    if "*" in s:
        b, n = s.split("*", 1)
        v = bytes.fromhex(b)
        assert len(v) == 1, s
        return v * int(n)
    return bytes.fromhex(s)


def bucket_mod(h, n):
    return h % n


def bucket_range(h, n):
    # floor(h * N / 2^64), exact with Python's big integers.
    return (h * n) >> 64


def encode_key(bucket, state, key, sub):
    return struct.pack(">IHI", bucket, state, len(key)) + key + sub


def encode_items(items):
    return b"".join(struct.pack(">I", len(it)) + it for it in items)


def ceil_div(a, b):
    return -(-a // b)


def worker_range(i, w, n):
    lo, hi = ceil_div(i * n, w), ceil_div((i + 1) * n, w) - 1
    return (lo, hi) if lo <= hi else None


def rows(name, minimum):
    r = BLOCKS.get(name)
    assert r is not None, f"FORMAT.md has no ```{name} block"
    assert len(r) >= minimum, f"{name}: {len(r)} vectors, want at least {minimum}"
    return r


@pytest.mark.parametrize("row", rows("vectors-hash", 5), ids=lambda r: r[0][:20])
def test_hash_and_buckets(row):
    key = parse_bytes(row[0])
    h = xxhash.xxh3_64_intdigest(key)  # seed 0
    assert f"{h:016x}" == row[1]
    assert xxhash.xxh3_64(key, seed=0).hexdigest() == row[1]
    want = [int(x) for x in row[2:]]
    got = []
    for n in (8, 128, 1000):
        got += [bucket_mod(h, n), bucket_range(h, n)]
    assert got == want


def test_hash_vectors_cover_required_keys():
    keys = {bytes(parse_bytes(r[0])) for r in rows("vectors-hash", 5)}
    for k in (b"", b"a", "größe-日本".encode(), b"user-000000042"):
        assert k in keys, k
    assert any(not _is_utf8(k) for k in keys), "no binary key"


def _is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize("row", rows("vectors-key", 3), ids=lambda r: r[4][:24])
def test_key_encoding(row):
    bucket, state = int(row[0]), int(row[1])
    key, sub, enc = parse_bytes(row[2]), parse_bytes(row[3]), parse_bytes(row[4])
    assert encode_key(bucket, state, key, sub) == enc
    # Decode by the byte layout of FORMAT.md section 4.
    b, s, n = struct.unpack(">IHI", enc[:10])
    assert (b, s, enc[10 : 10 + n], enc[10 + n :]) == (bucket, state, key, sub)


@pytest.mark.parametrize("row", rows("vectors-items", 3), ids=lambda r: r[0][:24])
def test_item_encoding(row):
    enc = parse_bytes(row[0])
    items = [parse_bytes(x) for x in row[1:]]
    assert encode_items(items) == enc


@pytest.mark.parametrize("row", rows("vectors-checksum", 2), ids=lambda r: r[0])
def test_checksum(row):
    data = parse_bytes(row[0])
    assert xxhash.xxh3_128_hexdigest(data) == row[1]
    # The 16 big-endian bytes of the 128-bit value, high half first.
    assert xxhash.xxh3_128_intdigest(data).to_bytes(16, "big").hex() == row[1]


@pytest.mark.parametrize("row", rows("vectors-workers", 3), ids=lambda r: f"N{r[0]}W{r[1]}")
def test_worker_assignment(row):
    n, w = int(row[0]), int(row[1])
    want = row[2:]
    assert len(want) == w
    got = []
    for i in range(w):
        r = worker_range(i, w, n)
        got.append("-" if r is None else f"{r[0]}..{r[1]}")
    assert got == want
    # The owner formula floor(b*W/N) agrees with the ranges.
    for b in range(n):
        r = worker_range(b * w // n, w, n)
        assert r is not None and r[0] <= b <= r[1]


def test_range_mapping_edges():
    # Independent of the vectors: the extremes of hash space.
    for n in (1, 8, 1000, 65536):
        assert bucket_range(0, n) == 0
        assert bucket_range(2**64 - 1, n) == n - 1


def _manifests():
    out = [REPO_ROOT / "snapshotfmt" / "testdata" / "valid.json"]
    out += sorted(p for p in REPO_ROOT.glob("**/testdata/**/MANIFEST.json") if ".venv" not in p.parts)
    return out


REPO_ROOT = FORMAT_MD.parent.parent


@pytest.mark.parametrize("path", _manifests(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_manifest_self_checksum(path):
    """FORMAT.md section 8: the self-checksum is XXH3-128 of the canonical
    encoding (one-space indent, checksum empty, no trailing newline),
    recomputed here with Python's json module."""
    raw = path.read_bytes()
    m = json.loads(raw)
    want = m["checksum"]
    m["checksum"] = ""
    body = json.dumps(m, indent=1, ensure_ascii=False).encode("utf-8")
    assert xxhash.xxh3_128_hexdigest(body) == want
    # The file itself is the canonical encoding plus a newline.
    m["checksum"] = want
    assert (json.dumps(m, indent=1, ensure_ascii=False) + "\n").encode("utf-8") == raw
    # And its partitioning is one this spec defines.
    p = m["partitioning"]
    assert p["hash"] == "xxh3-64" and p["mapping"] in ("mod", "range") and 1 <= p["buckets"] <= 65536
