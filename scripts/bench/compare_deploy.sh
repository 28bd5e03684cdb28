#!/usr/bin/env bash
# Deployment figures for one architecture (default resnet50, 1000 classes, 224 px): `trainer export` time and
# file size in each format, then the forward latency at batch 1 (median of 20 after 5 warm-up passes) of the
# checkpoint, the ONNX file in OpenCV's DNN module and the TorchScript file in LibTorch (`trainer bench
# predict`), beside Python's torchvision model and torch.jit.load of the same file (the reference). The
# latency variants take turns, RUNS times (default 3); prints every run and the medians.
#   scripts/bench/compare_deploy.sh [RUNS]        ARCH=resnet50 SIZE=224 CLASSES=1000 THREADS=(all cores)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
arch="${ARCH:-resnet50}"; size="${SIZE:-224}"; classes="${CLASSES:-1000}"; threads="${THREADS:-$(nproc)}"
trainer=build/release/trainer
[[ -x $trainer ]] || { echo "build first: scripts/build.sh release --target trainer" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# A checkpoint of the architecture: one short epoch on generated images, so BatchNorm has statistics.
cat >"$work/run.json" <<JSON
{"run": {"name": "deploy", "threads": $threads, "plot": false, "tensorboard": false},
 "data": {"kind": "synthetic", "batch_size": 2, "eval_batch_size": 2, "workers": 1,
          "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
          "synthetic": {"train_size": 4, "eval_size": 2, "height": $size, "width": $size, "channels": 3}},
 "model": {"arch": "$arch", "in_channels": 3, "num_classes": $classes},
 "optim": {"lr": 0.001}, "train": {"epochs": 1}}
JSON
"$trainer" --config "$work/run.json" -o "$work/run" >/dev/null
ck=$work/run/last.pt
echo "export ($arch, $classes classes, ${size}px):"
for f in safetensors onnx ts.pt; do
  line=$("$trainer" export --checkpoint "$ck" -o "$work/model.$f" | head -1)
  echo "  $f: $(stat -c %s "$work/model.$f") bytes, ${line##*MB, }" | sed 's/)$//'
done

names=(checkpoint onnx torchscript)
sources=("--checkpoint $ck" "--model $work/model.onnx" "--model $work/model.ts.pt --trust-model")  # our own export: trusted
declare -A ms
for i in $(seq "$runs"); do
  line="run $i:"
  for k in 0 1 2 3; do
    j=$(( (k + i) % 4 ))  # a different variant goes first each run
    if [[ $j == 3 ]]; then
      out=$(OMP_NUM_THREADS=$threads /usr/bin/python3 scripts/bench/deploy_latency.py "$work/model.ts.pt" "$arch" \
            "$classes" 3 "$size" "$size" --threads "$threads")
      ms[python_torchvision]+="$(field "$out" torchvision) "; ms[python_jit]+="$(field "$out" jit) "
    else
      # shellcheck disable=SC2086
      out=$("$trainer" bench predict ${sources[$j]} --batch 1 --warmup 5 --runs 20 --json)
      ms[${names[$j]}]+="$(field "$out" ms_median) "
    fi
  done
  for n in checkpoint onnx torchscript python_torchvision python_jit; do line+=" $n $(echo ${ms[$n]} | awk '{print $NF}') ms |"; done
  echo "$line"
done
echo "batch-1 latency, medians of $runs runs (each the median of 20 passes after 5 warm-up), $threads threads:"
for n in checkpoint onnx torchscript python_torchvision python_jit; do
  printf '  %-19s %8.2f ms\n' "$n" "$(median ${ms[$n]})"
done
