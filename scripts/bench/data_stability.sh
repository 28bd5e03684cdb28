#!/usr/bin/env bash
# Is the input pipeline's speed steady whatever the heap does? The same `trainer bench data` command RUNS times
# (default 10) in each of four ways: --warmup left at its default or written out (the same value, data.prefetch
# + 2), each with and without MALLOC_TRIM_THRESHOLD_ (which turns off the trainer's own glibc tuning). Prints every
# run's rate, peak RSS and page faults per timed batch, then per way the median, the spread (max / min - 1), the
# RSS, the faults and the blocks the run allocated; then the RSS of the same command with one-image batches (the
# baseline without batch memory) against (prefetch + 2) batches above it. The way `decode_only` times the workers decoding the same
# files whole and nothing else (no batches, no queue): the spread of the machine itself.
# The runs take turns, way after way, so that a slow minute of the machine falls on every way alike.
#   scripts/bench/data_stability.sh ROOT [RUNS]     CONFIG=configs/resnet18_imagenet.json WORKERS=2 BATCHES=24
#   WAYS="default decode_only" scripts/bench/data_stability.sh ROOT 10
#   WARMUP=2 WAYS="default trim decode_only" ...   the ways without the flag warm up 2 batches instead (the earlier
#                  default: the timed batches then include the pipeline filling up)
#   TRAINER=build/release/trainer
# ROOT: an ImageNet-layout folder (make_photo_folder.py writes one).
set -euo pipefail
cd "$(dirname "$0")/../.."
root="${1:?usage: data_stability.sh ROOT [RUNS]}"
runs="${2:-10}"
trainer="${TRAINER:-build/release/trainer}"
config="${CONFIG:-configs/resnet18_imagenet.json}"
command=("$trainer" bench data --config "$config" --set data.root="$root" --set data.workers="${WORKERS:-2}" --json)
# fields JSON KEY...: the values of a run's JSON line, space-separated; a KEY may be dotted (memory.prefetch), and
# one the line lacks prints "-"
fields() {
  /usr/bin/python3 -c 'import json,sys; run=json.loads(sys.argv[1]); out=[]
for key in sys.argv[2:]:
    v = run
    for k in key.split("."): v = v.get(k, "-") if isinstance(v, dict) else "-"
    out.append(str(v))
print(" ".join(out))' "$@"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

read -ra ways <<<"${WAYS:-default warmup_flag trim trim_warmup_flag}"
declare -A rates rss faults blocks
# One untimed pass first, so that no timed run reads the folder from the disk (the first one did: 22% slower).
default_warmup=$(fields "$("${command[@]}" --decode-only)" warmup)
for i in $(seq "$runs"); do
  for way in "${ways[@]}"; do
    extra=(); env=()
    [[ -n ${WARMUP:-} ]] && extra=(--warmup "$WARMUP")
    [[ $way == *warmup_flag ]] && extra=(--warmup "$default_warmup")
    [[ $way == trim* ]] && env=(MALLOC_TRIM_THRESHOLD_=134217728)
    [[ $way == decode_only ]] && extra=(--decode-only)
    out=$(env "${env[@]}" "${command[@]}" --batches "${BATCHES:-24}" "${extra[@]}")
    read -r rate peak f made new inputs <<<"$(fields "$out" images_per_s peak_rss_mib memory.page_faults_per_batch \
      memory.batches_made memory.new_batch_blocks memory.new_input_blocks)"
    rates[$way]+="$rate "; rss[$way]+="$peak "
    if [[ $way == decode_only ]]; then
      printf 'run %d %-17s %8.1f img/s  peak RSS %6.0f MiB\n' "$i" "$way" "$rate" "$peak"
      continue
    fi
    faults[$way]+="$f "
    blocks[$way]="$new batch blocks of $made made, $inputs float input"
    memory=$out
    printf 'run %d %-17s %8.1f img/s  peak RSS %6.0f MiB  %8.1f page faults per batch\n' "$i" "$way" "$rate" "$peak" "$f"
  done
done
echo "medians of $runs runs ($config, $root, ${BATCHES:-24} batches after a warmup of ${WARMUP:-$default_warmup}):"
for way in "${ways[@]}"; do
  # shellcheck disable=SC2086
  line=$(printf '%s\n' ${rates[$way]} | sort -g | awk -v w="$way" -v r="$(median ${rss[$way]})" \
    '{a[NR]=$1} END {m = (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)
       printf "  %-17s %8.1f img/s (min %.1f, max %.1f: spread %.1f%%), peak RSS %.0f MiB", w, m, a[1], a[NR], 100 * (a[NR] / a[1] - 1), r}')
  # shellcheck disable=SC2086
  [[ $way != decode_only ]] && line+=", $(median ${faults[$way]}) page faults per batch (${blocks[$way]})"
  echo "$line"
done
[[ -z ${memory:-} ]] && exit 0
base=$("${command[@]}" --set data.batch_size=1 --batches 4)
read -r prefetch batch_mib input_mib <<<"$(fields "$memory" memory.prefetch memory.batch_mib memory.input_mib)"
awk -v base="$(fields "$base" peak_rss_mib)" -v p="$prefetch" -v b="$batch_mib" -v f="$input_mib" 'BEGIN {
  printf "  baseline (batches of one image): peak RSS %.0f MiB; + (prefetch %d + 2) batches of %.2f MiB = %.1f MiB", base, p, b, base + (p + 2) * b
  printf "; + the float input (%.1f MiB) = %.1f MiB\n", f, base + (p + 2) * b + f }'
