// Reads Arrow IPC files with the npm apache-arrow package and prints, as
// one JSON object per file, what the interop test checks: row count,
// column names, schema metadata keys and the first rows' plain columns.
// Usage: node read_arrow.mjs FILE...
import { readFileSync } from "node:fs";
import { tableFromIPC } from "apache-arrow";

const plain = (v) => {
  if (v === null || v === undefined) return null;
  if (typeof v === "bigint") return v.toString();
  if (v instanceof Uint8Array) return Buffer.from(v).toString("base64");
  if (typeof v === "object" && typeof v.toJSON === "function") return v.toJSON();
  return v;
};

const out = {};
for (const path of process.argv.slice(2)) {
  const table = tableFromIPC(readFileSync(path));
  const names = table.schema.fields.map((f) => f.name);
  const rows = [];
  for (let i = 0; i < Math.min(table.numRows, 5); i++) {
    const row = {};
    for (const n of names) row[n] = plain(table.getChild(n).get(i));
    rows.push(row);
  }
  out[path] = {
    num_rows: table.numRows,
    columns: names,
    metadata_keys: [...table.schema.metadata.keys()].sort(),
    rows,
  };
}
process.stdout.write(JSON.stringify(out));
