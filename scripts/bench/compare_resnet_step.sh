#!/usr/bin/env bash
# Side by side, same cores, threads and LibTorch: the training step (forward, backward, SGD) of `trainer bench`
# vs the same step in Python torchvision (resnet_step.py, Debian's python3-torch), for resnet18 and resnet50 at
# batch 16 x 224 px and batch 64 x 64 px, channels_last off and on. Each measurement is its own process (so peak
# RSS is that configuration's); the two sides alternate RUNS times (default 3), taking turns to go first. Prints every run, then per
# configuration the median step time of each side, the ratio python/trainer (> 1: the trainer is faster) and
# the peak RSS. Needs scripts/setup.sh and a release build.
#   scripts/bench/compare_resnet_step.sh [RUNS]        STEPS=5 WARMUP=2 THREADS=2 ARCHS="resnet18 resnet50"
#                                                      SHAPES="16x224 64x64" CHANNELS_LAST="off on"
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
steps="${STEPS:-5}"; warmup="${WARMUP:-2}"; threads="${THREADS:-2}"
archs="${ARCHS:-resnet18 resnet50}"
shapes="${SHAPES:-16x224 64x64}"
trainer=build/release/trainer
[[ -x $trainer ]] || { echo "build first: scripts/build.sh release --target trainer" >&2; exit 1; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

summary=()
for arch in $archs; do
  for shape in $shapes; do
    batch=${shape%x*}; size=${shape#*x}
    for cl in ${CHANNELS_LAST:-off on}; do
      flag=""; [[ $cl == on ]] && flag="--channels-last"
      args=(--arch "$arch" --batch "$batch" --size "$size" --threads "$threads" --warmup "$warmup" --steps "$steps" $flag)
      cpp_ms=(); py_ms=(); cpp_rss=(); py_rss=()
      for i in $(seq "$runs"); do
        # Odd runs start with the trainer, even runs with Python, so neither side always follows the other.
        if (( i % 2 )); then
          c=$("$trainer" bench "${args[@]}" --json); p=$(/usr/bin/python3 scripts/bench/resnet_step.py "${args[@]}")
        else
          p=$(/usr/bin/python3 scripts/bench/resnet_step.py "${args[@]}"); c=$("$trainer" bench "${args[@]}" --json)
        fi
        cpp_ms+=("$(field "$c" step_ms_median)"); py_ms+=("$(field "$p" step_ms_median)")
        cpp_rss+=("$(field "$c" peak_rss_mib)"); py_rss+=("$(field "$p" peak_rss_mib)")
        printf '%s b%s %spx channels_last %s run %d: trainer %.1f ms | python %.1f ms\n' \
          "$arch" "$batch" "$size" "$cl" "$i" "${cpp_ms[-1]}" "${py_ms[-1]}"
      done
      mc=$(median "${cpp_ms[@]}"); mp=$(median "${py_ms[@]}")
      summary+=("$(printf '%-9s b%-3s %4spx  channels_last %-3s  trainer %8.1f ms  python %8.1f ms  ratio %.2f  peak RSS trainer %5.0f MiB  python %5.0f MiB' \
        "$arch" "$batch" "$size" "$cl" "$mc" "$mp" "$(awk -v a="$mp" -v b="$mc" 'BEGIN {print a / b}')" \
        "$(median "${cpp_rss[@]}")" "$(median "${py_rss[@]}")")")
    done
  done
done
echo "medians of $runs runs, $steps timed steps each, $threads threads (ratio = python / trainer step time):"
printf '%s\n' "${summary[@]}"
