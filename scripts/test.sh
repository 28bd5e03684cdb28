#!/usr/bin/env bash
# Fresh Debian 12 machine -> every test run: installs the packages, builds the release preset, runs ctest.
# Prints the build progress, then one line per test suite and a summary; exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
start=$(date +%s)
scripts/build.sh release
echo "test.sh: build took $(( $(date +%s) - start ))s"
start=$(date +%s)
ctest --preset release -j "$(nproc)"
echo "test.sh: tests took $(( $(date +%s) - start ))s"
