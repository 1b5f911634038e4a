#!/bin/sh
# Regenerates ../java_vectors.tsv and ../java_snapshots.tsv with Flink 2.3.0's own serializers and
# KeyGroupRangeAssignment. Needs Java 17 and the Flink jars in ~/.m2 (for
# example after `mvn dependency:get -Dartifact=org.apache.flink:flink-table-runtime:2.3.0`).
set -eu
cd "$(dirname "$0")"
R="${M2_REPO:-$HOME/.m2/repository}"
F="$R/org/apache/flink"
CP="$F/flink-core/2.3.0/flink-core-2.3.0.jar:$F/flink-core-api/2.3.0/flink-core-api-2.3.0.jar"
CP="$CP:$F/flink-annotations/2.3.0/flink-annotations-2.3.0.jar:$F/flink-runtime/2.3.0/flink-runtime-2.3.0.jar"
CP="$CP:$F/flink-table-common/2.3.0/flink-table-common-2.3.0.jar:$F/flink-table-runtime/2.3.0/flink-table-runtime-2.3.0.jar"
CP="$CP:$F/flink-shaded-guava/33.5.0-jre-21.0/flink-shaded-guava-33.5.0-jre-21.0.jar"
CP="$CP:$R/org/apache/commons/commons-lang3/3.18.0/commons-lang3-3.18.0.jar:$R/org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar"
CP="$CP:$R/com/esotericsoftware/kryo/5.6.2/kryo-5.6.2.jar:$R/com/esotericsoftware/minlog/1.3.1/minlog-1.3.1.jar:$R/org/objenesis/objenesis/3.4/objenesis-3.4.jar"
java -cp "$CP" KeyVectors.java ../java_snapshots.tsv > ../java_vectors.tsv
