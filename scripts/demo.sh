#!/usr/bin/env bash
# Fresh Debian 12 machine -> a trained classifier: installs the packages, builds trainer, trains the CNN on
# Fashion-MNIST (configs/fashion_mnist_cnn.json) into a new folder under runs/, then evaluates best.pt.
#   scripts/demo.sh [extra trainer options, e.g. --set train.epochs=10]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release --target trainer
run_dir="runs/fashion_mnist_demo-$(date +%Y%m%d-%H%M%S)"
build/release/trainer --config configs/fashion_mnist_cnn.json --set train.epochs=3 --output-dir "$run_dir" "$@"
build/release/trainer eval --checkpoint "$run_dir/best.pt"
echo "demo: run folder $run_dir (train.log, metrics.csv, last.pt, best.pt)"
