#!/usr/bin/env bash
# Runs one of the probe programs of interop/flink with real Flink 2.3.0:
#   interop/flink/probe.sh Make OUTDIR K [NAME...]      savepoints of the probe job
#   interop/flink/probe.sh Restore CASE...              the restore oracle (see Restore.java)
#   interop/flink/probe.sh KeyGroups [OUT.tsv]          Flink's key-group vectors
#   interop/flink/probe.sh SpaRewrite SRC DST M [hashmap|rocksdb] [PARALLELISM]
#                                                       the State Processor API peer rewrite
#   interop/flink/probe.sh Dump SAVEPOINT...            _metadata as Flink reads it
# Builds the Maven project first when its sources changed (offline from ~/.m2 when it can).
# JAVA_OPTS adds JVM options (default -Xmx2g).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cp_file="$here/target/classpath.txt"
if [ ! -f "$cp_file" ] || [ -n "$(find "$here/src" "$here/pom.xml" -newer "$cp_file" -print -quit)" ]; then
  mvn -q -B -o -f "$here/pom.xml" -DskipTests package >&2 || mvn -q -B -f "$here/pom.xml" -DskipTests package >&2
fi
main="${1:?usage: probe.sh Make|Restore|KeyGroups|SpaRewrite|Dump ARGS...}"
shift
# The State Processor API passes OperatorState objects through Kryo, which needs this on Java 17.
exec java ${JAVA_OPTS:--Xmx2g} --add-opens=java.base/java.lang=ALL-UNNAMED \
  -cp "$here/target/classes:$(cat "$cp_file")" "probe.$main" "$@"
