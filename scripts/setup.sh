#!/usr/bin/env bash
# Installs what trainer needs on Debian 12 (idempotent: does nothing when everything is present).
#   scripts/setup.sh    build, test and demo dependencies, the Fashion-MNIST dataset, and Python's torch and
#                       torchvision (same LibTorch): the weight-interop tests and the benchmarks compare with them
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev            # LibTorch 1.13 (CPU)
  libopenblas0-pthread    # optimized BLAS; without it Debian's LibTorch uses the slow reference one
  libcli11-dev libspdlog-dev nlohmann-json3-dev libopencv-dev libgtest-dev zlib1g-dev
  libonnx-dev python3-onnx  # ONNX export (protobuf classes, checker) and its Python-side check
  libgloo-dev             # headers of Gloo, which LibTorch's c10d process group (linked in libtorch) includes
  libcurl4-openssl-dev    # model.weights: downloads of published weights
  libjpeg62-turbo-dev     # libjpeg-turbo: the partial JPEG decode
  dataset-fashion-mnist   # /usr/share/datasets/fashion-mnist, the demo's dataset
  python3 python3-torch python3-torchvision
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
echo "setup: done"
