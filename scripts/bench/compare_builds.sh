#!/usr/bin/env bash
# Two builds of the trainer side by side, for a change that must not change behaviour (a refactor): the same
# Fashion-MNIST run with each (the weights they export must be byte-identical), then the training step of
# `trainer bench` (bare, and with loss scaler + clipping + EMA), the builds taking turns RUNS times (default 3).
# Prints every run, the medians and the ratio of this build to the other.
#   scripts/bench/compare_builds.sh OTHER_TRAINER [RUNS]     e.g. a worktree of main built with scripts/build.sh
#   ARCH=resnet18 BATCH=64 SIZE=64 STEM=small STEPS=10 LIMIT=4000 EPOCHS=2
set -euo pipefail
cd "$(dirname "$0")/../.."
other="${1:?usage: compare_builds.sh OTHER_TRAINER [RUNS]}"
runs="${2:-3}"
arch="${ARCH:-resnet18}"; batch="${BATCH:-64}"; size="${SIZE:-64}"; stem="${STEM:-small}"; steps="${STEPS:-10}"
this=build/release/trainer
[[ -x $this && -x $other ]] || { echo "build both first: $this and $other" >&2; exit 1; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The same run with each build: every random choice is a function of the seed, so equal code gives equal bytes.
for side in this other; do
  bin=$this; [[ $side == other ]] && bin=$other
  "$bin" --config configs/fashion_mnist_cnn.json --set data.limit_train="${LIMIT:-4000}" --set data.limit_eval=1000 \
    --set train.epochs="${EPOCHS:-2}" --set run.plot=false --set run.tensorboard=false -o "$work/$side" > /dev/null
  "$bin" export --checkpoint "$work/$side/last.pt" -o "$work/$side.safetensors" > /dev/null
done
if cmp -s "$work/this.safetensors" "$work/other.safetensors"; then
  echo "exported weights: byte-identical ($(sha256sum < "$work/this.safetensors" | cut -c1-16))"
else
  echo "exported weights: DIFFER"
  status=1
fi

names=(this_bare other_bare this_engine other_engine)
declare -A times
for i in $(seq "$runs"); do
  line="run $i:"
  for k in 0 1 2 3; do
    j=$(( (k + i) % 4 ))  # a different variant goes first each run
    bin=$this; [[ ${names[$j]} == other_* ]] && bin=$other
    flags=""; [[ ${names[$j]} == *_engine ]] && flags="--loss-scaler --clip 1.0 --ema"
    # shellcheck disable=SC2086
    out=$("$bin" bench --arch "$arch" --batch "$batch" --size "$size" --stem "$stem" --channels-last \
          --steps "$steps" --warmup 3 $flags --json)
    times[${names[$j]}]+="$(field "$out" step_ms_median) "
  done
  for n in "${names[@]}"; do line+=" $n $(echo ${times[$n]} | awk '{print $NF}') ms |"; done
  echo "$line"
done
echo "medians of $runs runs ($arch, batch $batch at ${size}px, stem $stem, channels_last, $steps steps):"
for v in bare engine; do
  a=$(median ${times[this_$v]}); b=$(median ${times[other_$v]})
  awk -v v="$v" -v a="$a" -v b="$b" 'BEGIN { printf "  %s step: this %.1f ms, other %.1f ms, ratio %.3f\n", v, a, b, a / b }'
done
exit "${status:-0}"
