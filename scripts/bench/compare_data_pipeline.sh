#!/usr/bin/env bash
# Side by side on the same folder and cores: images/s of the trainer's ImageNet training input pipeline
# (`trainer bench data`: read, reduced JPEG decode, RandomResizedCrop, flip, batch, normalise) vs torchvision's
# (data_pipeline.py: ImageFolder + PIL, RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize,
# DataLoader), both with 2 workers, batch 64, 224 px; and the full-size decode-only rate of the same files as
# the ceiling. The folder is built once from scikit-image's sample photographs (Debian's python3-skimage: the
# package is downloaded and unpacked, not installed) by make_photo_folder.py. Each side runs RUNS times
# (default 3), taking turns to go first; prints every run, then medians, ratios and peak RSS.
#   scripts/bench/compare_data_pipeline.sh [RUNS]        BATCHES=60 WARMUP=8 WORKERS=2 PER_CLASS=50
# (the warmup batches let both sides reach their steady state: heaps grown, workers started, files cached)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
batches="${BATCHES:-60}"; warmup="${WARMUP:-8}"; workers="${WORKERS:-2}"; per_class="${PER_CLASS:-50}"
trainer=build/release/trainer
[[ -x $trainer ]] || { echo "build first: scripts/build.sh release --target trainer" >&2; exit 1; }
work=build/bench-data
root=$work/imagenet-photos
mkdir -p "$work"

photos=/usr/lib/python3/dist-packages/skimage/data
if [[ ! -f $photos/astronaut.png ]]; then
  photos=$work/skimage/usr/lib/python3/dist-packages/skimage/data
  if [[ ! -f $photos/astronaut.png ]]; then
    (cd "$work" && apt-get download python3-skimage >/dev/null 2>&1) ||
      { echo "cannot download python3-skimage (its sample photographs are the benchmark's images)" >&2; exit 1; }
    dpkg-deb -x "$work"/python3-skimage_*.deb "$work/skimage"
  fi
fi
[[ -d $root/train ]] || /usr/bin/python3 scripts/bench/make_photo_folder.py "$photos" "$root" --per-class "$per_class"

config=$work/data_bench.json
cat > "$config" <<JSON
{"run": {"threads": 2},
 "data": {"kind": "imagenet", "root": "$root", "batch_size": 64, "workers": $workers, "prefetch": 4},
 "model": {"arch": "resnet50", "in_channels": 3, "num_classes": 10, "channels_last": true}}
JSON
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

ours=(); theirs=(); decode=(); our_rss=(); their_rss=(); worker_rss=()
for i in $(seq "$runs"); do
  run_ours() { c=$("$trainer" bench data --config "$config" --warmup "$warmup" --batches "$batches" --json); }
  run_theirs() { p=$(/usr/bin/python3 scripts/bench/data_pipeline.py "$root" --workers "$workers" --warmup "$warmup" --batches "$batches"); }
  if (( i % 2 )); then run_ours; run_theirs; else run_theirs; run_ours; fi
  d=$("$trainer" bench data --config "$config" --decode-only --json)
  ours+=("$(field "$c" images_per_s)"); theirs+=("$(field "$p" images_per_s)"); decode+=("$(field "$d" images_per_s)")
  our_rss+=("$(field "$c" peak_rss_mib)"); their_rss+=("$(field "$p" peak_rss_mib)")
  worker_rss+=("$(field "$p" worker_peak_rss_mib)")
  printf 'run %d: trainer %.1f img/s | torchvision %.1f img/s | decode only %.1f img/s\n' \
    "$i" "${ours[-1]}" "${theirs[-1]}" "${decode[-1]}"
done
mo=$(median "${ours[@]}"); mt=$(median "${theirs[@]}"); md=$(median "${decode[@]}")
echo "medians of $runs runs, $batches batches of 64 at 224 px, $workers workers, $(find "$root/train" -type f | wc -l) photos:"
awk -v o="$mo" -v t="$mt" -v d="$md" 'BEGIN {
  printf "  trainer %.1f img/s, torchvision %.1f img/s: ratio %.2f\n", o, t, o / t
  printf "  decode only (full size, same files, %s threads) %.1f img/s: trainer pipeline at %.2f of it\n", "'"$workers"'", d, o / d }'
echo "  peak RSS: trainer $(median "${our_rss[@]}") MiB (one process); torchvision main $(median "${their_rss[@]}") MiB + each of $workers workers up to $(median "${worker_rss[@]}") MiB"
