#!/usr/bin/env bash
# The README's main job, on the bundled sample snapshot (8 buckets, written by
# 4 workers): show that 40 workers cannot own its state, rewrite it to 160
# buckets (the count `plan --recommend --peak-width 40` names; verified
# against the source as part of the rewrite), prove the equality once more on
# its own, and show that the result loads at 40. Then the same story on a
# bundled Flink savepoint written by real Flink 2.3.0 (max parallelism 8):
# a start at parallelism 40 is refused; rewrite it to max parallelism 160, the count the
# refusal names.
# Needs only Go. Leaves its output in a temporary directory it names.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/rebucket-demo.XXXXXX")
bin="$work/rebucket"
go build -o "$bin" ./cmd/rebucket
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "rebucket $*"; "$bin" "$@"; }

run inspect examples/sample
say "rebucket plan examples/sample --widths 4,40   # 40 workers > 8 buckets"
"$bin" plan examples/sample --widths 4,40 | sed -n '/^width 40/,$p'
run plan --recommend --peak-width 40
run rewrite examples/sample --buckets 160 --out "$work/sample-160" --note "demo: make room for 40 workers"
run verify "$work/sample-160" --against examples/sample
run plan "$work/sample-160" --widths 40
say "rebucket load $work/sample-160 --width 40 --into $work/stores"
"$bin" load "$work/sample-160" --width 40 --into "$work/stores" | tail -n 4

sp=engine/flink/testdata/real/heap-files
say "rebucket verify $sp --width 40   # a Flink savepoint at max parallelism 8"
"$bin" verify "$sp" --width 40 || true
run rewrite "$sp" --buckets 160 --out "$work/savepoint-160"
run verify "$work/savepoint-160" --against "$sp"
run verify "$work/savepoint-160" --width 40
printf '\nThe rewritten snapshot is %s and the rewritten savepoint %s (remove %s when done).\n' "$work/sample-160" "$work/savepoint-160" "$work"
