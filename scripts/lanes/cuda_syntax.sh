#!/usr/bin/env bash
# The quick CUDA lane: every source file that holds CUDA-only code (TRAINER_CUDA, TRAINER_NVJPEG, c10/cuda,
# ATen/cuda, nvjpeg.h, NCCL) and the cuda tests (tests/cuda) compiled with -fsyntax-only against LibTorch 2.6's CUDA headers and CUDA 12.4's
# (nvjpeg.h included), in the torch2 lane's Debian 13 root. It catches what a GPU machine's build would refuse,
# in about a minute once the headers are cached, without the full cuda lane's 9 GiB root (scripts/lanes/cuda.sh,
# which also links and runs the tests). The headers come from four packages, unpacked, not installed (their
# libraries would pull in gigabytes): nvidia-cuda-dev, libcu++-dev, libtorch-cuda-dev and libnccl-dev (about
# 940 MB of downloads), kept in the root's /opt/cuda-headers.
#   sudo scripts/lanes/cuda_syntax.sh              every such file
#   sudo scripts/lanes/cuda_syntax.sh FILE...      these files only
#   CXX_STANDARD=20 sudo scripts/lanes/cuda_syntax.sh   as C++20 (default 17), as newer LibTorch headers require
set -euo pipefail
source "$(dirname "$0")/common.sh"

start=$(date +%s)
root=$(lane_root trixie trixie "main contrib non-free non-free-firmware")
trap 'lane_unmount "$root"' EXIT
lane_mounts "$root"
lane_install "$root" build-essential libtorch-dev libcli11-dev libspdlog-dev nlohmann-json3-dev libopencv-dev \
  libgtest-dev libjpeg62-turbo-dev libcurl4-openssl-dev

headers=$root/opt/cuda-headers
if [[ ! -f $headers/.ready ]]; then
  lane_log "fetching and unpacking the CUDA headers"
  rm -rf "$headers" && mkdir -p "$root/tmp/cuda-debs" "$headers"
  lane_run "$root" "apt-get update -qq && cd /tmp/cuda-debs && apt-get download nvidia-cuda-dev libcu++-dev libtorch-cuda-dev libnccl-dev" \
    >/dev/null 2>&1
  for deb in "$root"/tmp/cuda-debs/*.deb; do
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$headers" --wildcards '*/include/*'
  done
  rm -rf "$root/tmp/cuda-debs"
  touch "$headers/.ready"
fi

if [[ $# -gt 0 ]]; then
  files=("$@")
else
  mapfile -t files < <(cd "$repo" && { grep -rlE 'TRAINER_CUDA|TRAINER_NVJPEG|c10/cuda|ATen/cuda|nvjpeg\.h|NCCL' \
    --include='*.cpp' src tests; ls tests/cuda/*.cpp; } | sort -u)
fi
# The CPU LibTorch's headers first, the CUDA build's after them (-idirafter): they are the same 2.6 headers plus
# the CUDA ones the CPU package leaves out.
flags="-std=c++${CXX_STANDARD:-17} -Wall -Wextra -Wno-unused-parameter -Werror -fsyntax-only -DTRAINER_CUDA=1 -DTRAINER_NVJPEG=1
  -DFMT_SHARED -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DUSE_C10D_NCCL -DUSE_DISTRIBUTED
  -DUSE_C10D_GLOO -I/src/include -I/src/tests -isystem /usr/include/opencv4
  -isystem /usr/include/torch/csrc/api/include -idirafter /opt/cuda-headers/usr/include"
failed=0
for f in "${files[@]}"; do
  if lane_run "$root" "c++ ${flags//$'\n'/ } $f" 2>"$root/tmp/cuda-syntax.log"; then
    echo "ok      $f"
  else
    echo "FAILED  $f"
    head -30 "$root/tmp/cuda-syntax.log"
    failed=1
  fi
done
lane_log "${#files[@]} files in $(( $(date +%s) - start ))s"
exit $failed
