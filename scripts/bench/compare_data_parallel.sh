#!/usr/bin/env bash
# Data-parallel training side by side on this machine's cores: one Fashion-MNIST epoch of
# configs/fashion_mnist_cnn.json (global batch 64, the first LIMIT training images) with 1 process x THREADS threads and with NPROC processes x
# THREADS/NPROC threads (the built-in launcher, Gloo over loopback), for trainer and for the Python reference
# (mnist_reference.py: DistributedDataParallel + DistributedSampler, Debian's python3-torch). Alternates them RUNS
# times (default 3) and prints each run, the medians and the ratios. trainer's lines also give the all-reduce wait
# that backward did not hide. Needs scripts/setup.sh and a release build.
#   scripts/bench/compare_data_parallel.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
threads="${THREADS:-2}"
nproc="${NPROC:-2}"
limit="${LIMIT:-20000}"  # training images per epoch (data.limit_train), to keep a run short
trainer=build/release/trainer
[[ -x $trainer ]] || { echo "build first: scripts/build.sh release --target trainer" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# trainer PROCESSES RUN -> "img/s top1 wait%" of the epoch
run_trainer() {
  local procs=$1 out
  out=$("$trainer" --config configs/fashion_mnist_cnn.json --set train.epochs=1 --set train.log_every=100000 --set data.limit_train="$limit" \
        --set run.threads=$(( threads / procs )) --set data.workers=$(( threads / procs )) \
        $([[ $procs -gt 1 ]] && echo "--nproc-per-node $procs") -o "$scratch/run-$procs-$2" 2>&1)
  echo "$(grep -oP 'epoch 1/1 done in [0-9.]+s: .*?, \K[0-9]+(?= img/s)' <<<"$out")" \
       "$(grep -oP 'eval epoch 1: loss [0-9.]+ top1 \K[0-9.]+' <<<"$out")" \
       "$(grep -oP 'all-reduce wait \K[0-9]+%' <<<"$out" || echo -)"
}
run_python() {
  local out
  out=$(/usr/bin/python3 scripts/bench/mnist_reference.py --threads "$threads" --workers "$threads" --nproc "$1" --limit-train "$limit")
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(round(r["images_per_s"]), r["top1"])' "$out"
}

declare -A speeds
for i in $(seq "$runs"); do
  line="run $i:"
  for procs in 1 "$nproc"; do
    read -r speed top1 wait < <(run_trainer "$procs" "$i")
    speeds[cpp$procs]+="$speed "
    read -r py_speed py_top1 < <(run_python "$procs")
    speeds[py$procs]+="$py_speed "
    line+=" | ${procs}p trainer $speed img/s (top1 $top1, all-reduce wait $wait) python $py_speed img/s (top1 $py_top1)"
  done
  echo "$line"
done
median() { printf '%s\n' $@ | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for procs in 1 "$nproc"; do
  c=$(median ${speeds[cpp$procs]}); p=$(median ${speeds[py$procs]})
  echo "median ${procs} process(es): trainer $c img/s | python $p img/s | ratio $(awk -v a="$c" -v b="$p" 'BEGIN {printf "%.2f", a / b}')"
done
