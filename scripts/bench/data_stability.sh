#!/usr/bin/env bash
# Is the input pipeline's speed steady whatever the heap does? The same `trainer bench data` command RUNS times
# (default 10) in each of four ways: --warmup left at its default or written out (the same value), each with and
# without MALLOC_TRIM_THRESHOLD_ (which turns off the trainer's own glibc tuning). Prints every run's rate and
# peak RSS, then per way the median, the spread (max / min - 1) and the RSS, and the RSS of the same command
# with one-image batches (the baseline without batch memory) for comparison. The way `decode_only` times the
# workers decoding the same files whole and nothing else (no batches, no queue): the spread of the machine itself.
# The runs take turns, way after way, so that a slow minute of the machine falls on every way alike.
#   scripts/bench/data_stability.sh ROOT [RUNS]     CONFIG=configs/resnet18_imagenet.json WORKERS=2 BATCHES=24
#   WAYS="default decode_only" scripts/bench/data_stability.sh ROOT 10
#   TRAINER=build/release/trainer
# ROOT: an ImageNet-layout folder (make_photo_folder.py writes one).
set -euo pipefail
cd "$(dirname "$0")/../.."
root="${1:?usage: data_stability.sh ROOT [RUNS]}"
runs="${2:-10}"
trainer="${TRAINER:-build/release/trainer}"
config="${CONFIG:-configs/resnet18_imagenet.json}"
command=("$trainer" bench data --config "$config" --set data.root="$root" --set data.workers="${WORKERS:-2}" --json)
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

read -ra ways <<<"${WAYS:-default warmup_flag trim trim_warmup_flag}"
declare -A rates rss
# One untimed pass first, so that no timed run reads the folder from the disk (the first one did: 22% slower).
"${command[@]}" --decode-only >/dev/null
for i in $(seq "$runs"); do
  for way in "${ways[@]}"; do
    extra=(); env=()
    [[ $way == *warmup_flag ]] && extra=(--warmup 2)
    [[ $way == trim* ]] && env=(MALLOC_TRIM_THRESHOLD_=134217728)
    [[ $way == decode_only ]] && extra=(--decode-only)
    out=$(env "${env[@]}" "${command[@]}" --batches "${BATCHES:-24}" "${extra[@]}")
    rates[$way]+="$(field "$out" images_per_s) "; rss[$way]+="$(field "$out" peak_rss_mib) "
    printf 'run %d %-17s %8.1f img/s  peak RSS %6.0f MiB\n' "$i" "$way" "$(field "$out" images_per_s)" \
      "$(field "$out" peak_rss_mib)"
  done
done
base=$("${command[@]}" --set data.batch_size=1 --batches 4)
echo "medians of $runs runs ($config, $root):"
for way in "${ways[@]}"; do
  # shellcheck disable=SC2086
  printf '%s\n' ${rates[$way]} | sort -g | awk -v w="$way" -v r="$(median ${rss[$way]})" \
    '{a[NR]=$1} END {m = (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)
       printf "  %-17s %8.1f img/s (min %.1f, max %.1f: spread %.1f%%), peak RSS %.0f MiB\n", w, m, a[1], a[NR], 100 * (a[NR] / a[1] - 1), r}'
done
echo "  baseline (batches of one image): peak RSS $(field "$base" peak_rss_mib) MiB"
