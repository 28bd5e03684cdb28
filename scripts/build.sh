#!/usr/bin/env bash
# Configures and builds a CMake preset (default: release). Extra arguments go to `cmake --build`.
#   scripts/build.sh [preset] [--target trainer]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
shift || true
cmake --preset "$preset" > /dev/null
cmake --build --preset "$preset" "$@"
