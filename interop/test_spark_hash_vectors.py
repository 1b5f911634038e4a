"""Rebuilds every input of engine/spark/testdata/interop/hash_vectors.tsv from
its spelling and recomputes Spark's Murmur3Hash independently (written here
from Spark's Murmur3_x86_32 and HashExpression, not from the Go code). Proves
that the TSV spells each value exactly, so the Go test of the same file tests
the Go hash against Spark's own numbers. Needs no JVM."""

import pathlib
import struct

import pytest

TSV = pathlib.Path(__file__).resolve().parent.parent / "engine" / "spark" / "testdata" / "interop" / "hash_vectors.tsv"
MODS = [2, 3, 8, 200]
M32 = 0xFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def _mix_k1(k1):
    k1 = (k1 * 0xCC9E2D51) & M32
    k1 = _rotl(k1, 15)
    return (k1 * 0x1B873593) & M32


def _mix_h1(h1, k1):
    h1 ^= k1
    h1 = _rotl(h1, 13)
    return (h1 * 5 + 0xE6546B64) & M32


def _fmix(h1, length):
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & M32
    return h1 ^ (h1 >> 16)


def hash_int(v, seed):
    return _fmix(_mix_h1(seed, _mix_k1(v & M32)), 4)


def hash_long(v, seed):
    v &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed, _mix_k1(v & M32))
    h1 = _mix_h1(h1, _mix_k1(v >> 32))
    return _fmix(h1, 8)


def hash_unsafe_bytes(b, seed):
    # Spark's legacy hashUnsafeBytes: 4-byte LE words, then every tail byte
    # on its own, sign-extended, through a full mix round.
    n = len(b) - len(b) % 4
    h1 = seed
    for i in range(0, n, 4):
        h1 = _mix_h1(h1, _mix_k1(struct.unpack_from("<I", b, i)[0]))
    for i in range(n, len(b)):
        h1 = _mix_h1(h1, _mix_k1(struct.unpack_from("<b", b, i)[0] & M32))
    return _fmix(h1, len(b))


def to_signed(h):
    return h - (1 << 32) if h & 0x80000000 else h


def hash_value(t, v, seed):
    """Spark's HashExpression.computeHash of one column; seed unsigned."""
    if v == "null":
        return seed
    if t in ("string", "binary"):
        assert v.startswith("x"), v
        return hash_unsafe_bytes(bytes.fromhex(v[1:]), seed)
    if t == "boolean":
        return hash_int({"true": 1, "false": 0}[v], seed)
    if t in ("tinyint", "smallint", "int", "date"):
        return hash_int(int(v), seed)
    if t in ("bigint", "timestamp", "timestamp_ntz"):
        return hash_long(int(v), seed)
    if t == "float":
        bits = int(v, 16)
        x = struct.unpack(">f", bits.to_bytes(4, "big"))[0]
        if x == 0.0:  # -0.0 hashes as 0.0
            bits = 0
        elif x != x:  # floatToIntBits: one NaN
            bits = 0x7FC00000
        return hash_int(bits, seed)
    if t == "double":
        bits = int(v, 16)
        x = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
        if x == 0.0:
            bits = 0
        elif x != x:
            bits = 0x7FF8000000000000
        return hash_long(bits, seed)
    if t.startswith("decimal("):
        p = int(t[8:-1].split(",")[0])
        u = int(v)
        if p <= 18:
            return hash_long(u, seed)
        # BigInteger.toByteArray: minimal two's complement, big-endian
        nbytes = (u + (u < 0)).bit_length() // 8 + 1
        return hash_unsafe_bytes(u.to_bytes(nbytes, "big", signed=True), seed)
    raise ValueError(f"unknown type {t}")


def rows():
    out = []
    for line in TSV.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or line.startswith("types\t") or not line:
            continue
        f = line.split("\t")
        assert len(f) == 8, line
        out.append(f)
    return out


ROWS = rows()


def test_table_is_large():
    assert len(ROWS) >= 100
    types = {t for r in ROWS for t in r[0].split(";")}
    for want in ["string", "binary", "boolean", "int", "bigint", "float", "double", "date", "timestamp",
                 "decimal(38,10)", "decimal(10,2)"]:
        assert want in types, want
    assert any(";" in r[0] for r in ROWS), "no multi-column key"


@pytest.mark.parametrize("row", ROWS, ids=[f"{r[0]}={r[1][:40]}" for r in ROWS])
def test_vector(row):
    types, values = row[0].split(";"), row[1].split(";")
    assert len(types) == len(values)
    h = 42
    for t, v in zip(types, values):
        h = hash_value(t, v, h)
    h = to_signed(h)
    assert h == int(row[2]), f"hash: Python {h}, Spark {row[2]}"
    for m, want in zip(MODS, row[3:7]):
        assert h % m == int(want), f"pmod {m}"
