#!/usr/bin/env bash
# Fetch Delta Lake's jars once into .delta-jars/ (git-ignored), with the machine's own Maven
# from Maven Central. The embedded Spark session loads them from there (spark.jars), so
# tests and the demo never touch the network after setup. Only io.delta artifacts are kept:
# pyspark already ships the Spark, Hadoop, Parquet, Jackson and Scala jars Delta needs.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.delta-jars
if ls "$out"/delta-spark_*.jar >/dev/null 2>&1; then
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "mvn not found: installing maven with apt-get" >&2
    apt-get update -qq && apt-get install -y -qq maven >/dev/null
  else
    echo "mvn not found: install Maven (e.g. 'sudo apt-get install maven'), then run make again." >&2
    exit 1
  fi
fi
echo "fetching Delta Lake jars (scripts/delta-jars.pom.xml) into $out/" >&2
rm -rf "$out.tmp"
mvn -q -B -f scripts/delta-jars.pom.xml dependency:copy-dependencies \
  -DincludeGroupIds=io.delta -DoutputDirectory="$PWD/$out.tmp"
mv "$out.tmp" "$out"
ls "$out"
