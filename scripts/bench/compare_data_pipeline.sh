#!/usr/bin/env bash
# Side by side on the same folder and cores: images/s of the trainer's ImageNet training input pipeline
# (`trainer bench data`: read, reduced JPEG decode, RandomResizedCrop, flip, [augmentation policy], batch,
# normalise, [random erasing]) vs torchvision's (data_pipeline.py: ImageFolder + PIL, the same transforms,
# DataLoader), both with 2 workers, batch 64, 224 px; and the full-size decode-only rate of the same files as
# the ceiling. Each augmentation variant (VARIANTS; "+erase" adds random erasing with p 0.25) is timed on both
# sides. The folder is built once from scikit-image's sample photographs (Debian's python3-skimage: the
# package is downloaded and unpacked, not installed) by make_photo_folder.py. Each side runs RUNS times
# (default 3), taking turns to go first; prints every run, then medians, ratios, each variant's cost over the
# plain pipeline, and peak RSS. With OLD=path/to/another/trainer, that build runs too, in turn with the others,
# on the same configs (its rate, and this build's as a ratio of it), and both time the eval pipeline.
# LONGER=4032 builds (and times) a folder of 12-megapixel phone photos instead of ImageNet-sized ones.
#   scripts/bench/compare_data_pipeline.sh [RUNS]        BATCHES=60 WARMUP=8 WORKERS=2 PER_CLASS=50 OLD= LONGER=
#   VARIANTS="none trivialaugment_wide randaugment augmix imagenet trivialaugment_wide+erase"
# (the warmup batches let both sides reach their steady state: heaps grown, workers started, files cached)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
batches="${BATCHES:-60}"; warmup="${WARMUP:-8}"; workers="${WORKERS:-2}"; per_class="${PER_CLASS:-50}"
variants="${VARIANTS:-none trivialaugment_wide randaugment augmix imagenet trivialaugment_wide+erase}"
trainer=build/release/trainer
[[ -x $trainer ]] || { echo "build first: scripts/build.sh release --target trainer" >&2; exit 1; }
old="${OLD:-}"; longer="${LONGER:-0}"
[[ -z $old || -x $old ]] || { echo "OLD=$old is not an executable" >&2; exit 1; }
work=build/bench-data
root=$work/imagenet-photos
[[ $longer == 0 ]] || root=$work/phone-photos-$longer
mkdir -p "$work"

source scripts/bench/photos.sh
photos=$(sample_photos "$work")
[[ -d $root/train ]] || /usr/bin/python3 scripts/bench/make_photo_folder.py "$photos" "$root" --per-class "$per_class" \
  --longer "$longer" --jobs 2

field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# One config per variant: the policy name and, with "+erase", random erasing.
variant_config() {
  local policy=${1%+erase} erase=0
  [[ $1 == *+erase ]] && erase=0.25
  local config=$work/data_bench_${1//+/_}.json
  cat > "$config" <<JSON
{"run": {"threads": 2},
 "data": {"kind": "imagenet", "root": "$root", "batch_size": 64, "workers": $workers, "prefetch": 4,
          "augment": {"auto_augment": "$policy", "random_erasing": {"prob": $erase}}},
 "model": {"arch": "resnet50", "in_channels": 3, "num_classes": 10, "channels_last": true}}
JSON
  echo "$config"
}

declare -A our_median their_median old_median
decode=(); our_rss=(); their_rss=(); worker_rss=(); old_rss=()
for variant in $variants; do
  config=$(variant_config "$variant")
  policy=${variant%+erase}; erase=0; [[ $variant == *+erase ]] && erase=0.25
  ours=(); theirs=(); olds=()
  for i in $(seq "$runs"); do
    run_ours() { c=$("$trainer" bench data --config "$config" --warmup "$warmup" --batches "$batches" --json); }
    run_old() { o=$("$old" bench data --config "$config" --warmup "$warmup" --batches "$batches" --json); }
    run_theirs() {
      p=$(/usr/bin/python3 scripts/bench/data_pipeline.py "$root" --workers "$workers" --warmup "$warmup" \
            --batches "$batches" --auto-augment "$policy" --random-erase "$erase")
    }
    # Each side goes first in turn.
    sides=(run_ours run_theirs); [[ -n $old ]] && sides+=(run_old)
    for k in $(seq 0 $(( ${#sides[@]} - 1 ))); do ${sides[$(( (k + i) % ${#sides[@]} ))]}; done
    ours+=("$(field "$c" images_per_s)"); theirs+=("$(field "$p" images_per_s)")
    our_rss+=("$(field "$c" peak_rss_mib)"); their_rss+=("$(field "$p" peak_rss_mib)")
    worker_rss+=("$(field "$p" worker_peak_rss_mib)")
    line=$(printf '%s run %d: trainer %.1f img/s | torchvision %.1f img/s' "$variant" "$i" "${ours[-1]}" "${theirs[-1]}")
    if [[ -n $old ]]; then
      olds+=("$(field "$o" images_per_s)"); old_rss+=("$(field "$o" peak_rss_mib)")
      line+=$(printf ' | old build %.1f img/s' "${olds[-1]}")
    fi
    echo "$line"
  done
  our_median[$variant]=$(median "${ours[@]}"); their_median[$variant]=$(median "${theirs[@]}")
  [[ -z $old ]] || old_median[$variant]=$(median "${olds[@]}")
done
# The eval pipeline (resize, center crop; a new loader per pass over val/), this build against the old one.
evals=(); old_evals=()
if [[ -n $old ]]; then
  for i in $(seq "$runs"); do
    e=$("$trainer" bench data --config "$(variant_config none)" --eval --warmup 2 --batches "$batches" --json)
    f=$("$old" bench data --config "$(variant_config none)" --eval --warmup 2 --batches "$batches" --json)
    evals+=("$(field "$e" images_per_s)"); old_evals+=("$(field "$f" images_per_s)")
    printf 'eval run %d: trainer %.1f img/s | old build %.1f img/s\n' "$i" "${evals[-1]}" "${old_evals[-1]}"
  done
fi
for i in $(seq "$runs"); do
  d=$("$trainer" bench data --config "$(variant_config none)" --decode-only --json)
  decode+=("$(field "$d" images_per_s)")
done
md=$(median "${decode[@]}")
echo "medians of $runs runs, $batches batches of 64 at 224 px, $workers workers, $(find "$root/train" -type f | wc -l) photos:"
base_o=${our_median[none]:-}; base_t=${their_median[none]:-}
for variant in $variants; do
  awk -v v="$variant" -v o="${our_median[$variant]}" -v t="${their_median[$variant]}" -v bo="$base_o" -v bt="$base_t" 'BEGIN {
    line = sprintf("  %-26s trainer %7.1f img/s, torchvision %6.1f img/s: ratio %.2f", v, o, t, o / t)
    # Cost of the augmentation as a share of the augmented pipeline: 1 - (time plain / time augmented).
    if (bo != "" && v != "none") line = line sprintf("; cost over plain: trainer %.1f%%, torchvision %.1f%%", 100 * (1 - o / bo), 100 * (1 - t / bt))
    print line }'
  [[ -z $old ]] || awk -v o="${our_median[$variant]}" -v p="${old_median[$variant]}" \
    'BEGIN { printf "  %-26s old build %7.1f img/s: this build at %.2fx\n", "", p, o / p }'
done
if [[ -n $old ]]; then
  awk -v e="$(median "${evals[@]}")" -v f="$(median "${old_evals[@]}")" \
    'BEGIN { printf "  eval pipeline: trainer %.1f img/s, old build %.1f img/s: %.2fx\n", e, f, e / f }'
fi
awk -v d="$md" -v o="${base_o:-0}" 'BEGIN {
  printf "  decode only (full size, same files, %s threads) %.1f img/s", "'"$workers"'", d
  if (o > 0) printf ": plain trainer pipeline at %.2f of it", o / d
  printf "\n" }'
echo "  peak RSS: trainer $(median "${our_rss[@]}") MiB (one process); torchvision main $(median "${their_rss[@]}") MiB + each of $workers workers up to $(median "${worker_rss[@]}") MiB"
[[ -z $old ]] || echo "  peak RSS of the old build: $(median "${old_rss[@]}") MiB"
