"""The query-engine peer of a rewrite: DuckDB reads the snapshot's Parquet
export, computes a new bucket from a hash of the key, sorts by (bucket,
step, state, key, sub_key) and writes Parquet, the way a data engineer
would rebucket with a query engine.

    python bench/duckdb_peer.py IN.parquet OUT.parquet BUCKETS THREADS

DuckDB's own hash() stands in for XXH3 (DuckDB has no XXH3, and a Python
UDF would make the peer slower than it is): the work, one hash per row, a
full sort and a Parquet write, is the same.
"""

import sys

import duckdb


def main() -> None:
    src, out, buckets, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET preserve_insertion_order = true")
    con.execute(
        f"""COPY (
              SELECT CAST(hash(key) % {buckets} AS UINTEGER) AS bucket,
                     step, state, key, sub_key, value
              FROM read_parquet('{src}')
              ORDER BY bucket, step, state, key, sub_key
            ) TO '{out}' (FORMAT parquet, COMPRESSION snappy)"""
    )
    rows = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0]
    print(rows)


if __name__ == "__main__":
    main()
