#!/usr/bin/env bash
# Peak memory of `--resume auto` on a ResNet-50 run folder holding last.pt, two step-N.pt and two epoch-E.pt
# (about 200 MB each: weights and SGD momentum), with this build and another, taking turns RUNS times (default 3):
# the start-up that finds the newest good checkpoint, restores it and trains one more step.
#   scripts/bench/resume_auto_memory.sh OTHER_TRAINER [RUNS]     e.g. a worktree of main built with scripts/build.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
other="${1:?usage: resume_auto_memory.sh OTHER_TRAINER [RUNS]}"
runs="${2:-3}"
this=build/release/trainer
[[ -x $this && -x $other ]] || { echo "build both first: $this and $other" >&2; exit 1; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 3 epochs of 4 steps (synthetic 32x32 images, batch 2): step checkpoints every 3 steps (the newest 2 kept),
# every epoch kept from epoch 2 on, stopped after step 11 so that last.pt is newer than all of them.
cat >"$work/c.json" <<'JSON'
{"run": {"seed": 1, "threads": 2, "plot": false, "tensorboard": false},
 "data": {"kind": "synthetic", "synthetic": {"train_size": 8, "eval_size": 2, "height": 32, "width": 32,
          "channels": 3}, "batch_size": 2, "eval_batch_size": 2, "workers": 0},
 "model": {"arch": "resnet50", "num_classes": 10, "in_channels": 3},
 "optim": {"lr": 0.01, "momentum": 0.9},
 "train": {"epochs": 3, "checkpoint_every_steps": 3, "keep_last": 2, "keep_every_epochs": 1, "eval_every": 3}}
JSON
"$this" --config "$work/c.json" -o "$work/run" --stop-after-step 11 >/dev/null
echo "run folder: $(cd "$work/run" && ls -1 ./*.pt | xargs -n1 basename | tr '\n' ' ')($(du -sh --apparent-size "$work/run" | cut -f1))"

declare -A peaks
for i in $(seq "$runs"); do
  line="run $i:"
  for side in this other; do
    bin=$this; [[ $side == other ]] && bin=$other
    rm -rf "$work/copy" && cp -r "$work/run" "$work/copy"
    /usr/bin/time -f '%M' -o "$work/peak" "$bin" --resume auto --config "$work/c.json" -o "$work/copy" \
      --stop-after-step 12 >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; exit 1; }
    kb=$(tail -1 "$work/peak")
    peaks[$side]+="$kb "
    line+=" $side $(( kb / 1024 )) MiB"
  done
  echo "$line"
done
# shellcheck disable=SC2086
t=$(median ${peaks[this]}); o=$(median ${peaks[other]})
echo "peak RSS, medians of $runs: this $(( ${t%.*} / 1024 )) MiB, other $(( ${o%.*} / 1024 )) MiB, ratio $(awk -v a="$t" -v b="$o" 'BEGIN { printf "%.2f", a / b }')"
