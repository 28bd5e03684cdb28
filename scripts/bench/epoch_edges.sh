#!/usr/bin/env bash
# What epoch edges cost the input pipelines: `trainer bench data` (ImageNet transforms, batch BATCH) over a small
# folder of photographs, whose epochs hold few batches (300 images: 256 + 44), and over a large one (4,000: 16
# batches of 256) of the same pictures, with 1 and 2 workers; for training (one loader across epochs) and for
# evaluation (`--eval`: 300 or 4,000 validation images, a new loader per pass as each evaluation makes one). With
# no stall at the edges, the small folder runs at the large one's rate. Each case runs RUNS times (default 3),
# taking turns; prints every run and the medians: small / large (the edge cost) and 2 workers / 1 (the scaling).
# OTHER=path/to/trainer adds another build beside (one without --eval times training only).
#   scripts/bench/epoch_edges.sh [RUNS]        BATCH=256 BATCHES=24 WARMUP=4 MODES="train eval"
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
batch="${BATCH:-256}"; batches="${BATCHES:-24}"; warmup="${WARMUP:-4}"
read -r -a modes <<< "${MODES:-train eval}"
builds=(build/release/trainer ${OTHER:-})
[[ -x ${builds[0]} ]] || { echo "build first: scripts/build.sh release --target trainer" >&2; exit 1; }
work=build/bench-data
mkdir -p "$work"
source scripts/bench/photos.sh
photos=$(sample_photos "$work")
for n in 300 4000; do
  [[ -d $work/photos$n/train ]] ||
    /usr/bin/python3 scripts/bench/make_photo_folder.py "$photos" "$work/photos$n" --per-class $((n / 10)) --jobs 2
  [[ -f $work/val$n/val_label.txt ]] ||
    /usr/bin/python3 scripts/bench/make_photo_folder.py "$photos" "$work/val$n" --per-class 1 \
      --val-per-class $((n / 10)) --jobs 2
done
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

declare -A rates
cases=()
for b in "${!builds[@]}"; do for m in "${modes[@]}"; do for n in 300 4000; do for w in 1 2; do
  cases+=("$b:$m:$n:$w")
done; done; done; done
for i in $(seq "$runs"); do
  line="run $i:"
  for k in "${!cases[@]}"; do
    c=${cases[$(( (k + i) % ${#cases[@]} ))]}  # a different case goes first each run
    IFS=: read -r b m n w <<< "$c"
    if [[ $m == eval ]]; then folder=(--eval --set data.root="$work/val$n" --set data.eval_batch_size="$batch")
    else folder=(--set data.root="$work/photos$n" --set data.batch_size="$batch"); fi
    out=$("${builds[$b]}" bench data --config configs/resnet50_imagenet.json "${folder[@]}" \
          --set data.workers="$w" --set model.num_classes=10 --set run.threads="$w" \
          --warmup "$warmup" --batches "$batches" --json)
    rates[$c]+="$(field "$out" images_per_s) "
    line+=" [$c] $(printf '%.0f' "$(field "$out" images_per_s)")"
  done
  echo "$line img/s"
done
for b in "${!builds[@]}"; do
  echo "${builds[$b]}: medians of $runs runs (batch $batch, $batches batches after $warmup):"
  for m in "${modes[@]}"; do
    for w in 1 2; do
      s=$(median ${rates[$b:$m:300:$w]}); l=$(median ${rates[$b:$m:4000:$w]})
      awk -v m="$m" -v w="$w" -v s="$s" -v l="$l" 'BEGIN { printf "  %s, %d worker(s): 300 photos %.0f img/s, 4000 photos %.0f img/s, small / large %.2f\n", m, w, s, l, s / l }'
    done
    awk -v m="$m" -v a="$(median ${rates[$b:$m:4000:1]})" -v b2="$(median ${rates[$b:$m:4000:2]})" \
      'BEGIN { printf "  %s, 2 workers / 1 on 4000 photos: %.2f\n", m, b2 / a }'
  done
done
