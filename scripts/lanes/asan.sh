#!/usr/bin/env bash
# The sanitizer lane: the asan preset (AddressSanitizer + UndefinedBehaviorSanitizer, RelWithDebInfo) built here
# against Debian 12's LibTorch into build/asan, and the whole test suite run under it (the e2e tests start the
# sanitized trainer binary too). A UBSan finding stops its process (halt_on_error), so it fails its test.
#   scripts/lanes/asan.sh          build and run every test
#   scripts/lanes/asan.sh -R unit  extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
cmake --preset asan >/dev/null
cmake --build --preset asan
echo "asan.sh: built in $(( $(date +%s) - start ))s"
ctest --preset asan -j "$(nproc)" "$@"
echo "asan.sh: passed in $(( $(date +%s) - start ))s"
