#!/usr/bin/env bash
# PySpark needs a Java runtime (17 is tested). Install it from the OS packages if missing.
set -euo pipefail
if command -v java >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "java not found: installing openjdk-17-jre-headless with apt-get" >&2
  apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  exit 0
fi
echo "java not found. Install a Java 17 runtime first, e.g. 'sudo apt-get install openjdk-17-jre-headless'" \
     "(Debian/Ubuntu) or 'brew install openjdk@17' (macOS), then run make again." >&2
exit 1
