#!/usr/bin/env bash
# The CUDA build lane: Debian 13 (trixie) with LibTorch 2.6's CUDA build (libtorch-cuda-dev, contrib) and the
# CUDA 12.4 toolkit (non-free). Configures the cuda preset into build/lane-cuda, builds everything (every
# TRAINER_CUDA line compiles and links) and runs the whole test suite on this GPU-less machine, where CUDA is
# present but finds no device. Needs root; the root is cached (about 9 GiB) in $TRAINER_LANE_CACHE/trixie-cuda.
#
# cuDNN: Debian's libtorch-cuda depends on nvidia-cudnn, an installer that downloads cuDNN from NVIDIA and cannot
# work offline. The lane installs a stand-in package of that name instead and builds a stub libcudnn.so.9 from the
# cuDNN symbols libtorch_cuda.so and libtorch_python.so import; every stub call returns
# CUDNN_STATUS_NOT_INITIALIZED and cudnnGetVersion returns 0. Nothing calls cuDNN without a GPU, so the build
# links and runs; on a GPU machine use the real cuDNN.
# Gloo's headers come from libgloo-cuda-dev: libgloo-dev conflicts with the CUDA LibTorch's Gloo and would
# replace it with the CPU one. libnccl-dev's nccl.h compiles c10d's NCCL process group (run.dist_backend nccl).
#   sudo scripts/lanes/cuda.sh           build and run every test
#   sudo scripts/lanes/cuda.sh -R unit   extra arguments go to ctest
set -euo pipefail
source "$(dirname "$0")/common.sh"

start=$(date +%s)
root=$(lane_root trixie-cuda trixie "main contrib non-free non-free-firmware")
trap 'lane_unmount "$root"' EXIT
lane_mounts "$root"

# The stand-in nvidia-cudnn package (metadata only), installed before anything that depends on it.
if ! lane_run "$root" "dpkg-query -W -f='\${Status}' nvidia-cudnn 2>/dev/null | grep -q 'install ok installed'"; then
  lane_log "installing the stand-in nvidia-cudnn package"
  stand_in=$root/tmp/nvidia-cudnn-stand-in
  rm -rf "$stand_in" && mkdir -p "$stand_in/DEBIAN"
  cat >"$stand_in/DEBIAN/control" <<'CONTROL'
Package: nvidia-cudnn
Version: 9.0.0.312~lane-stub
Architecture: amd64
Maintainer: trainer lanes <root@localhost>
Description: stand-in for NVIDIA's cuDNN installer in trainer's offline CUDA build lane
 Holds no files; scripts/lanes/cuda.sh builds a stub libcudnn.so.9 for linking.
CONTROL
  lane_run "$root" "dpkg-deb --build /tmp/nvidia-cudnn-stand-in /tmp/nvidia-cudnn.deb >/dev/null && dpkg -i /tmp/nvidia-cudnn.deb >/dev/null"
fi
lane_install "$root" build-essential cmake ninja-build pkg-config libtorch-cuda-dev nvidia-cuda-toolkit libcuda1 \
  libopenblas0-pthread libcli11-dev libspdlog-dev nlohmann-json3-dev libopencv-dev libgtest-dev zlib1g-dev libgloo-cuda-dev libnccl-dev \
  libcurl4-openssl-dev libjpeg62-turbo-dev \
  python3 python3-torch-cuda python3-torchvision

# The stub cuDNN: one function per cuDNN symbol that libtorch_cuda and libtorch_python (python3-torch-cuda, for
# the interop tests) import. Rebuilt on every run (a second): a package update may import more.
lane_log "building the stub libcudnn.so.9"
lane_run "$root" '
  libs=$(ls /usr/lib/x86_64-linux-gnu/libtorch_cuda.so* /usr/lib/x86_64-linux-gnu/libtorch_python.so* 2>/dev/null)
  { echo "#include <stddef.h>"
    echo "size_t cudnnGetVersion(void) { return 0; }"
    echo "size_t cudnnGetCudartVersion(void) { return 0; }"
    for lib in $libs; do nm -D --undefined-only "$lib"; done | awk "{print \$2}" | sed "s/@.*//" | grep "^cudnn" |
      grep -v -x -e cudnnGetVersion -e cudnnGetCudartVersion | sort -u |
      while read -r f; do echo "int $f(void) { return 1001; }"; done
  } >/tmp/cudnn_stub.c
  # libtorch_cuda binds versioned symbols (name@libcudnn.so.9): export them under that version node.
  echo "libcudnn.so.9 { global: *; };" >/tmp/cudnn_stub.map
  gcc -shared -fPIC -o /usr/local/lib/libcudnn.so.9 -Wl,-soname,libcudnn.so.9 \
    -Wl,--version-script=/tmp/cudnn_stub.map /tmp/cudnn_stub.c
  ln -sf libcudnn.so.9 /usr/local/lib/libcudnn.so && ldconfig'
lane_log "root ready in $(( $(date +%s) - start ))s"

build=build/lane-cuda
lane_run "$root" "cmake --preset cuda -B $build >/dev/null && cmake --build $build"
lane_run "$root" "grep -q 'TRAINER_CUDA=1' $build/build.ninja" || { lane_log "TRAINER_CUDA is not defined: not a CUDA build"; exit 1; }
lane_run "$root" "grep -q 'USE_C10D_NCCL' $build/build.ninja" || { lane_log "nccl.h not found: c10d's NCCL group was not built"; exit 1; }
lane_run "$root" "grep -q 'TRAINER_NVJPEG=1' $build/build.ninja" || { lane_log "nvJPEG not found: data.decode cuda was not built"; exit 1; }
lane_log "built in $(( $(date +%s) - start ))s: $(lane_run "$root" "$build/trainer --version | head -2 | tr '\n' ' '")"
lane_run "$root" "ctest --test-dir $build --output-on-failure --timeout 300 -j $(nproc) $*"
lane_log "passed in $(( $(date +%s) - start ))s"
