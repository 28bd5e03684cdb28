#!/usr/bin/env bash
# The training engine's own cost and CPU mixed precision, side by side in one run: `trainer bench` step time
# of one model with a bare step (float32), with the loss scaler's work + gradient clipping + EMA, and with
# bfloat16 autocast. The variants take turns, RUNS times (default 3); prints every run, the medians and the
# ratios to the bare step.
#   scripts/bench/compare_engine.sh [RUNS]        ARCH=resnet18 BATCH=64 SIZE=64 STEM=small STEPS=10
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
arch="${ARCH:-resnet18}"; batch="${BATCH:-64}"; size="${SIZE:-64}"; stem="${STEM:-small}"; steps="${STEPS:-10}"
trainer=build/release/trainer
[[ -x $trainer ]] || { echo "build first: scripts/build.sh release --target trainer" >&2; exit 1; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
names=(bare engine bf16)
flags=("" "--loss-scaler --clip 1.0 --ema" "--amp bfloat16")
declare -A times
for i in $(seq "$runs"); do
  line="run $i:"
  for k in 0 1 2; do
    j=$(( (k + i) % 3 ))  # a different variant goes first each run
    # shellcheck disable=SC2086
    out=$("$trainer" bench --arch "$arch" --batch "$batch" --size "$size" --stem "$stem" --channels-last \
          --steps "$steps" --warmup 3 ${flags[$j]} --json)
    times[${names[$j]}]+="$(field "$out" step_ms_median) "
  done
  for n in "${names[@]}"; do line+=" $n $(echo ${times[$n]} | awk '{print $NF}') ms |"; done
  echo "$line"
done
bare=$(median ${times[bare]}); engine=$(median ${times[engine]}); bf16=$(median ${times[bf16]})
echo "medians of $runs runs ($arch, batch $batch at ${size}px, stem $stem, channels_last, $steps steps):"
awk -v b="$bare" -v e="$engine" -v h="$bf16" 'BEGIN {
  printf "  bare float32 step %.1f ms\n", b
  printf "  + loss scaler + clipping + EMA %.1f ms: overhead %+.1f%%\n", e, 100 * (e / b - 1)
  printf "  bfloat16 autocast %.1f ms: %.2fx the float32 step time\n", h, h / b }'
