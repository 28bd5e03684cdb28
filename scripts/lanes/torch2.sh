#!/usr/bin/env bash
# The LibTorch 2.x lane: Debian 13 (trixie) with its LibTorch 2.6 (CPU), python3-torch 2.6 and torchvision.
# Builds the release preset there into build/lane-torch2 and runs the whole test suite, ONNX exports checked in
# ONNX Runtime (python3-onnxruntime) as well. Needs root; the trixie
# root is cached in $TRAINER_LANE_CACHE (default /var/cache/trainer-lanes/trixie, about 3 GiB).
#   sudo scripts/lanes/torch2.sh          build and run every test
#   sudo scripts/lanes/torch2.sh -R unit  extra arguments go to ctest
set -euo pipefail
source "$(dirname "$0")/common.sh"

start=$(date +%s)
root=$(lane_root trixie trixie "main contrib non-free non-free-firmware")
trap 'lane_unmount "$root"' EXIT
lane_mounts "$root"
lane_install "$root" build-essential cmake ninja-build pkg-config libtorch-dev libopenblas0-pthread \
  libcli11-dev libspdlog-dev nlohmann-json3-dev libopencv-dev libgtest-dev zlib1g-dev libgloo-dev libonnx-dev libcurl4-openssl-dev libjpeg62-turbo-dev \
  python3 python3-torch python3-torchvision python3-onnx python3-onnxruntime
lane_log "root ready in $(( $(date +%s) - start ))s"

build=build/lane-torch2
lane_run "$root" "cmake --preset release -B $build >/dev/null && cmake --build $build"
lane_log "built in $(( $(date +%s) - start ))s: $(lane_run "$root" "$build/trainer --version | head -1")"
# ONNX exports are checked in ONNX Runtime here too (e2e/ExportCli): required, not skipped.
lane_run "$root" "TRAINER_REQUIRE_ONNXRUNTIME=1 ctest --test-dir $build --output-on-failure --timeout 300 -j $(nproc) $*"
lane_log "passed in $(( $(date +%s) - start ))s"
