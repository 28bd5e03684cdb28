#!/usr/bin/env bash
# The one-call GPU check, run on the GPU machine (device tool) from the repository root, under 8 minutes:
# builds the trainer against that machine's own LibTorch (python3's torch) with the kit from make_kit.sh, then
#   1. trainer doctor;
#   2. the tests labelled cuda (ctest -L cuda);
#   3. a float16 AMP + loss scaler run of resnet18 on generated photos, which must learn (val top-1 >= 0.5);
#   4. with run.deterministic: 2 epochs straight vs stopped mid-epoch and resumed: identical exported weights;
#   5. trainer bench: ResNet-50, 224 px, batch 256, channels_last, float16 and bfloat16 (img/s, peak memory);
#   6. trainer bench data: the ImageNet input pipeline at 224 px on every core, against the model's rate;
#   7. trainer export to TorchScript (checked against the checkpoint), predict --model vs predict --checkpoint.
# Everything goes to OUT/gpu-check.json (and the logs beside it). Each part records its own failure and the
# rest still run; the exit code is non-zero when any part failed.
#   scripts/gpu/check.sh [KIT_TAR] [OUT]    defaults: build/gpu-kit/gpu-kit.tar.gz and $OUT (or build/gpu-check)
# Without a GPU (a dry run here) the CUDA parts skip or run on the CPU with small sizes: TRAINER_CHECK_CPU=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
kit_tar=${1:-build/gpu-kit/gpu-kit.tar.gz}
out=$(mkdir -p "${2:-${OUT:-build/gpu-check}}" && cd "${2:-${OUT:-build/gpu-check}}" && pwd)
work=build/gpu
cpu=${TRAINER_CHECK_CPU:-0}
python=${TRAINER_CHECK_PYTHON:-python3}
mkdir -p "$work"
start=$(date +%s)
results=$out/parts.jsonl
: >"$results"
failed=0
log() { echo "check [$(( $(date +%s) - start ))s]: $*" | tee -a "$out/check.log" >&2; }
# part NAME STATUS JSON: one line of the results file.
part() { printf '{"part": "%s", "status": "%s", "seconds": %d, "result": %s}\n' "$1" "$2" "$(( $(date +%s) - part_start ))" "${3:-null}" >>"$results"; [[ $2 == ok ]] || failed=1; }

# ---- build ----
part_start=$(date +%s)
rm -rf "$work/kit" && tar -xzf "$kit_tar" -C "$work"
kit=$(cd "$work/kit" && pwd)
torch_cmake=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
log "LibTorch $("$python" -c 'import torch; print(torch.__version__, torch.version.cuda)'), building"
if cmake -S . -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINER_PYTHON="$(command -v "$python")" \
     -DCMAKE_PREFIX_PATH="$kit/usr;$torch_cmake" -DZLIB_ROOT="$kit/usr/opencv" >"$out/configure.log" 2>&1 &&
   cmake --build "$work/build" --target trainer trainer_cuda_tests -- -k 0 >"$out/build.log" 2>&1; then
  part build ok "{\"torch\": \"$("$python" -c 'import torch; print(torch.__version__)')\"}"
else
  tail -n 40 "$out/configure.log" "$out/build.log" >&2
  part build failed
  python3 -c "import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])], indent=1))" "$results" >"$out/gpu-check.json"
  exit 1
fi
trainer=$work/build/trainer
export LD_LIBRARY_PATH="$kit/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"

# ---- 1. doctor ----
part_start=$(date +%s)
log "doctor"
"$trainer" doctor >"$out/doctor.txt" 2>&1; rc=$?
part doctor "$([[ $rc == 0 ]] && echo ok || echo failed)" "$(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read().splitlines()))' "$out/doctor.txt")"

# ---- 2. the cuda tests ----
part_start=$(date +%s)
log "ctest -L cuda"
(cd "$work/build" && ctest -L cuda --output-on-failure) >"$out/ctest-cuda.txt" 2>&1; rc=$?
part cuda_tests "$([[ $rc == 0 ]] && echo ok || echo failed)" "$(python3 -c 'import json,sys; print(json.dumps([l for l in open(sys.argv[1]).read().splitlines() if "Test #" in l or "tests passed" in l]))' "$out/ctest-cuda.txt")"

# ---- generated photos: 10 classes of ImageNet-sized JPEGs ----
photos=$work/photos
if [[ ! -f $photos/val_label.txt ]]; then
  log "generating photos"
  "$python" - "$work/photo-sources" <<'PY'
# Ten smooth random "photographs" (low-frequency colour fields with texture): crops of one share its look.
import os, sys
import numpy as np
from PIL import Image
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
names = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
         "motorcycle_right.png", "retina.jpg", "hubble_deep_field.jpg", "ihc.png", "camera.png"]
for c, name in enumerate(names):
    rng = np.random.default_rng(c)
    field = rng.random((12, 16, 3))
    img = Image.fromarray((field * 255).astype(np.uint8)).resize((1024, 768), Image.BICUBIC)
    a = np.asarray(img).astype(np.float32)
    yy, xx = np.mgrid[0:768, 0:1024]
    a += 40 * np.sin((xx * np.cos(c) + yy * np.sin(c)) / (4 + c))[..., None]
    Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(os.path.join(out, name))
PY
  "$python" scripts/bench/make_photo_folder.py "$work/photo-sources" "$photos" --per-class 260 >/dev/null
fi

device=cuda; amp=float16; size=224; batch=128; epochs=6
[[ $cpu == 1 ]] && { device=cpu; amp=bfloat16; size=64; batch=32; epochs=1; }
cat >"$work/photos.json" <<JSON
{
  "run": { "name": "photos", "output_dir": "$work/runs", "device": "$device", "plot": false, "tensorboard": false },
  "data": { "kind": "imagenet", "root": "$photos", "batch_size": $batch, "eval_batch_size": 256, "workers": $(nproc),
            "augment": { "image_size": $size } },
  "model": { "arch": "resnet18", "in_channels": 3, "num_classes": 10 },
  "optim": { "name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-5 },
  "schedule": { "kind": "cosine", "warmup_epochs": 1 },
  "train": { "epochs": $epochs, "log_every": 5, "amp": { "enabled": true, "dtype": "$amp" } }
}
JSON

# ---- 3. float16 AMP + loss scaler training that learns ----
part_start=$(date +%s)
log "resnet18 $amp training on generated photos"
rm -rf "$work/runs/photos"
"$trainer" --config "$work/photos.json" >"$out/train.log" 2>&1; rc=$?
top1=$(python3 -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; ev=[r for r in rows if r.get("kind")=="eval"]; print(ev[-1]["top1"] if ev else -1)' "$work/runs/photos/metrics.jsonl" 2>/dev/null || echo -1)
ips=$(grep -o '[0-9]* img/s' "$out/train.log" | tail -1 | cut -d' ' -f1)
learned=$(python3 -c "print('ok' if $rc == 0 and $top1 >= 0.5 else 'failed')")
[[ $cpu == 1 && $rc == 0 ]] && learned=ok  # one short CPU epoch: the path, not the accuracy
part train_amp "$learned" "{\"exit\": $rc, \"val_top1\": $top1, \"last_train_img_per_s\": ${ips:-0}, \"dtype\": \"$amp\"}"

# ---- 4. deterministic mid-epoch stop and resume, bit-identical ----
part_start=$(date +%s)
log "deterministic resume"
det=(--set run.deterministic=true --set train.epochs=2 --set train.checkpoint_every_steps=0)
rm -rf "$work/runs/straight" "$work/runs/split"
"$trainer" --config "$work/photos.json" "${det[@]}" -o "$work/runs/straight" >"$out/resume.log" 2>&1 &&
"$trainer" --config "$work/photos.json" "${det[@]}" -o "$work/runs/split" --stop-after-step 7 >>"$out/resume.log" 2>&1 &&
"$trainer" --resume "$work/runs/split/last.pt" >>"$out/resume.log" 2>&1 &&
"$trainer" export --checkpoint "$work/runs/straight/last.pt" -o "$work/straight.safetensors" >>"$out/resume.log" 2>&1 &&
"$trainer" export --checkpoint "$work/runs/split/last.pt" -o "$work/split.safetensors" >>"$out/resume.log" 2>&1
rc=$?
if [[ $rc == 0 ]] && cmp -s "$work/straight.safetensors" "$work/split.safetensors"; then
  part deterministic_resume ok '{"identical": true}'
else
  part deterministic_resume failed "{\"exit\": $rc, \"identical\": false}"
fi

# ---- 5. ResNet-50 step rate and memory ----
for dtype in float16 bfloat16; do
  part_start=$(date +%s)
  log "bench resnet50 $dtype"
  bench=(bench --arch resnet50 --size 224 --batch 256 --channels-last --amp "$dtype" --warmup 10 --steps 40 --json)
  [[ $cpu == 1 ]] && bench=(bench --arch resnet50 --size 64 --batch 8 --channels-last --amp bfloat16 --warmup 1 --steps 2 --json)
  if "$trainer" "${bench[@]}" >"$out/bench-$dtype.json" 2>"$out/bench-$dtype.err"; then
    part "bench_resnet50_$dtype" ok "$(tail -1 "$out/bench-$dtype.json")"
  else
    part "bench_resnet50_$dtype" failed
  fi
done

# ---- 6. the input pipeline on every core ----
part_start=$(date +%s)
log "bench data"
if "$trainer" bench data --config "$work/photos.json" --set data.batch_size=256 --set data.augment.image_size=224 \
     --batches 30 --json >"$out/bench-data.json" 2>"$out/bench-data.err"; then
  part bench_data ok "$(tail -1 "$out/bench-data.json")"
else
  part bench_data failed
fi

# ---- 7. deployment export on this LibTorch: TorchScript of the trained run, checked by export against the
# checkpoint's logits, then predict --model against predict --checkpoint on two validation photos ----
part_start=$(date +%s)
log "export torchscript"
photo_files=$(ls "$photos"/val/* | head -2 | tr '\n' ' ')
# shellcheck disable=SC2086
if "$trainer" export --checkpoint "$work/runs/photos/best.pt" -o "$work/photos.ts.pt" >"$out/export.log" 2>&1 &&
   "$trainer" predict --checkpoint "$work/runs/photos/best.pt" $photo_files --json >"$work/predict-ck.json" 2>>"$out/export.log" &&
   "$trainer" predict --model "$work/photos.ts.pt" $photo_files --json >"$work/predict-ts.json" 2>>"$out/export.log"; then
  same=$(python3 -c 'import json,sys
a, b = (json.loads(open(f).read())["predictions"] for f in sys.argv[1:3])
print(str([p["top"][0]["class"] for p in a] == [p["top"][0]["class"] for p in b]).lower())' "$work/predict-ck.json" "$work/predict-ts.json")
  part export_torchscript "$([[ $same == true ]] && echo ok || echo failed)" \
    "{\"same_top1\": $same, \"checked\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$(grep checked: "$out/export.log")")}"
else
  part export_torchscript failed
fi

python3 -c "import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])], indent=1))" "$results" >"$out/gpu-check.json"
log "done: $out/gpu-check.json ($([[ $failed == 0 ]] && echo 'all parts ok' || echo 'some parts FAILED'))"
exit $failed
