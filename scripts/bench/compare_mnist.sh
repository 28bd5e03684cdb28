#!/usr/bin/env bash
# Side by side, same cores, threads, batch, model and LibTorch: one Fashion-MNIST epoch with trainer vs the
# Python reference (mnist_reference.py, Debian's python3-torch). Runs them alternately RUNS times (default 3)
# and prints each run, the medians and the ratio. Needs scripts/setup.sh and a release build.
#   scripts/bench/compare_mnist.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
threads="${THREADS:-2}"
workers="${WORKERS:-2}"
trainer=build/release/trainer
[[ -x $trainer ]] || { echo "build first: scripts/build.sh release --target trainer" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

cpp_speeds=(); py_speeds=(); cpp_top1=(); py_top1=()
for i in $(seq "$runs"); do
  out=$("$trainer" --config configs/fashion_mnist_cnn.json --set train.epochs=1 --set train.log_every=100000 \
        --set run.threads="$threads" --set data.workers="$workers" -o "$scratch/run$i" 2>&1)
  speed=$(grep -oP 'epoch 1/1 done in [0-9.]+s: .*?, \K[0-9]+(?= img/s)' <<<"$out")
  top1=$(grep -oP 'eval epoch 1: loss [0-9.]+ top1 \K[0-9.]+' <<<"$out")
  cpp_speeds+=("$speed"); cpp_top1+=("$top1")
  py=$(/usr/bin/python3 scripts/bench/mnist_reference.py --threads "$threads" --workers "$workers" ${PY_FLAGS:-})
  py_speed=$(python3 -c 'import json,sys; print(round(json.loads(sys.argv[1])["images_per_s"]))' "$py")
  py_acc=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["top1"])' "$py")
  py_speeds+=("$py_speed"); py_top1+=("$py_acc")
  echo "run $i: trainer $speed img/s (top1 $top1) | python $py_speed img/s (top1 $py_acc)"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mc=$(median "${cpp_speeds[@]}"); mp=$(median "${py_speeds[@]}")
echo "median: trainer $mc img/s (top1 $(median "${cpp_top1[@]}")) | python $mp img/s (top1 $(median "${py_top1[@]}"))"
echo "ratio trainer/python: $(awk -v a="$mc" -v b="$mp" 'BEGIN {printf "%.2f", a / b}')"
