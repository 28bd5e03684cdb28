#!/usr/bin/env bash
# The one-call GPU check, run on the GPU machine (device tool) from the repository root, in about 9 minutes:
# builds the trainer against that machine's own LibTorch (python3's torch) with the kit from make_kit.sh, then
#   1. trainer doctor;
#   2. the tests labelled cuda (ctest -L cuda);
#   3. a float16 AMP + loss scaler run of resnet18 on generated photos, which must learn (val top-1 >= 0.5);
#   4. with run.deterministic: 2 epochs straight vs stopped mid-epoch and resumed: identical exported weights;
#   5. trainer bench: ResNet-50, 224 px, batch 256, channels_last, float16 and bfloat16 (img/s, peak memory);
#   6. trainer bench data at 2, 4, 8 and 16 workers over a 12,000-photo folder: the pipeline's scaling;
#   7. ResNet-50 training from that folder (float16, channels_last): img/s and data wait against part 5;
#   8. PyTorch beside it: torchvision's resnet50 step as part 5 times ours, and its DataLoader at 16 workers;
#   9. NCCL with one rank (--nproc-per-node 1): a short run completes;
#  10. part 7's TensorBoard event files read by the tensorboard package;
#  (7 also trains with data.decode cuda, and 7b times the GPU decode beside torchvision.io.decode_jpeg;)
#  11. trainer export to TorchScript (checked against the checkpoint), predict --model vs predict --checkpoint;
# and ends with the ratios: step and pipeline against PyTorch, JPEGs against synthetic input, 16-worker scaling.
# Everything goes to OUT/gpu-check.json (and the logs beside it). Each part records its own failure (the new parts
# under a time limit of their own, so that one that hangs leaves time for the rest) and the rest still run; the exit code is non-zero when any part failed.
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
# A part that does not apply here (the GPU decode in a dry run) is "skipped", which is not a failure.
part() { printf '{"part": "%s", "status": "%s", "seconds": %d, "result": %s}\n' "$1" "$2" "$(( $(date +%s) - part_start ))" "${3:-null}" >>"$results"; [[ $2 == ok || $2 == skipped ]] || failed=1; }

# ---- build (TRAINER_CHECK_BUILD=DIR: a build folder made already, for dry runs) ----
part_start=$(date +%s)
build=${TRAINER_CHECK_BUILD:-}
if [[ -z $build ]]; then
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
  build=$work/build
  export LD_LIBRARY_PATH="$kit/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
trainer=$build/trainer

# ---- 1. doctor ----
part_start=$(date +%s)
log "doctor"
"$trainer" doctor >"$out/doctor.txt" 2>&1; rc=$?
part doctor "$([[ $rc == 0 ]] && echo ok || echo failed)" "$(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read().splitlines()))' "$out/doctor.txt")"

# ---- 2. the cuda tests ----
part_start=$(date +%s)
log "ctest -L cuda"
(cd "$build" && ctest -L cuda --output-on-failure) >"$out/ctest-cuda.txt" 2>&1; rc=$?
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
# photo_config FILE NAME ROOT ARCH BATCH SIZE EPOCHS TENSORBOARD: a run over a generated photo folder.
photo_config() {
  cat >"$1" <<JSON
{
  "run": { "name": "$2", "output_dir": "$work/runs", "device": "$device", "plot": false, "tensorboard": $8 },
  "data": { "kind": "imagenet", "root": "$3", "batch_size": $5, "eval_batch_size": 256, "workers": $(nproc),
            "augment": { "image_size": $6 } },
  "model": { "arch": "$4", "in_channels": 3, "num_classes": 10 },
  "optim": { "name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-5 },
  "schedule": { "kind": "cosine", "warmup_epochs": 1 },
  "train": { "epochs": $7, "log_every": 5, "amp": { "enabled": true, "dtype": "$amp" } }
}
JSON
}
photo_config "$work/photos.json" photos "$photos" resnet18 "$batch" "$size" "$epochs" false

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

# ---- a photo folder big enough for a steady state: 12,000 training and 500 validation JPEGs, written by every
# core (each image a function of its class and index, so the folder is the same however many write it) ----
part_start=$(date +%s)
big=$work/photos12k
per_class=1200; val_per_class=50
[[ $cpu == 1 ]] && { per_class=40; val_per_class=5; }
if [[ ! -f $big/val_label.txt ]] || [[ $(find "$big/train" -name '*.JPEG' | wc -l) != $((10 * per_class)) ]]; then
  log "generating $((10 * per_class)) photos"
  rm -rf "$big"
  "$python" scripts/bench/make_photo_folder.py "$work/photo-sources" "$big" --per-class "$per_class" \
    --val-per-class "$val_per_class" --jobs "$(nproc)" >"$out/photos12k.log" 2>&1
fi
images=$(find "$big/train" -name '*.JPEG' | wc -l)
part photos12k "$([[ $images == $((10 * per_class)) ]] && echo ok || echo failed)" \
  "{\"train_images\": $images, \"val_images\": $(find "$big/val" -name '*.JPEG' | wc -l)}"

arch=resnet50; size=224; batch=256; workers_list="2 4 8 16"
[[ $cpu == 1 ]] && { arch=resnet18; size=64; batch=32; workers_list="1 2"; }
photo_config "$work/photos12k.json" photos12k "$big" "$arch" "$batch" "$size" 2 true

# ---- 6. the input pipeline's scaling: bench data at 2, 4, 8 and 16 workers, each past a warm-up round (a batch
# per worker) and over 4 batches per worker, the CPU decoding (data.decode cpu); the main thread normalises on one
# core ----
part_start=$(date +%s)
log "bench data scaling: $workers_list workers"
scaling="{"
for w in $workers_list; do
  if timeout 90 "$trainer" bench data --config "$work/photos12k.json" --set data.workers="$w" --set run.threads=1 \
       --set data.decode=cpu \
       --warmup "$w" --batches $((4 * w)) --json >"$out/bench-data-$w.json" 2>"$out/bench-data-$w.err"; then
    scaling+="\"$w\": $(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["images_per_s"])' "$out/bench-data-$w.json"), "
  else
    scaling+="\"$w\": null, "
  fi
done
scaling="${scaling%, }}"
part bench_data_scaling "$(grep -q null <<<"$scaling" && echo failed || echo ok)" "{\"images_per_s_by_workers\": $scaling}"

# ---- 7. the real job: ResNet-50 training from the JPEG folder (224 px, batch 256, float16, channels_last on
# every core), its second epoch's img/s and data wait against the synthetic step rate of part 5; the JPEGs decoded
# by the CPU workers, then by nvJPEG on the GPU (data.decode cuda) ----
for decode in cpu cuda; do
  part_start=$(date +%s)
  if [[ $decode == cuda && ( $cpu == 1 || ! $("$trainer" --version) =~ nvJPEG ) ]]; then
    part "train_from_jpeg_${decode}_decode" skipped '"no GPU or no nvJPEG in this build"'
    continue
  fi
  log "$arch training from JPEGs, decode $decode"
  rm -rf "$work/runs/photos12k-$decode"
  timeout 180 "$trainer" --config "$work/photos12k.json" --set data.decode="$decode" -o "$work/runs/photos12k-$decode" \
    >"$out/train-jpeg-$decode.log" 2>&1; rc=$?
  jpeg=$(python3 - "$work/runs/photos12k-$decode/metrics.jsonl" <<'PY2' 2>/dev/null || echo null
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in rows if r.get("kind") == "train" and r.get("epoch") == 2]
wait = sum(r["data_wait_s"] for r in train)
busy = wait + sum(r["compute_s"] for r in train)
print(json.dumps({"epoch2_images_per_s_median": statistics.median(r["images_per_s"] for r in train),
                  "epoch2_data_wait_share": wait / busy, "intervals": len(train)}))
PY2
)
  part "train_from_jpeg_${decode}_decode" "$([[ $rc == 0 && $jpeg != null ]] && echo ok || echo failed)" \
    "{\"exit\": $rc, \"arch\": \"$arch\", \"dtype\": \"$amp\", \"decode\": \"$decode\", \"figures\": $jpeg, \"decode_line\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$(grep -m1 'decode:' "$out/train-jpeg-$decode.log")")}"
done

# ---- 7b. the GPU decode alone: bench data with data.decode cuda on every core, and torchvision.io.decode_jpeg on
# the GPU (nvJPEG through PyTorch) over the same files as the reference ----
part_start=$(date +%s)
if [[ $cpu == 1 || ! $("$trainer" --version) =~ nvJPEG ]]; then
  part bench_data_gpu_decode skipped '"no GPU or no nvJPEG in this build"'
else
  log "bench data, decode cuda"
  if timeout 90 "$trainer" bench data --config "$work/photos12k.json" --set data.decode=cuda --set run.threads=1 \
       --warmup 16 --batches 64 --json >"$out/bench-data-gpu.json" 2>"$out/bench-data-gpu.err"; then
    part bench_data_gpu_decode ok "$(tail -1 "$out/bench-data-gpu.json")"
  else
    part bench_data_gpu_decode failed
  fi
fi
part_start=$(date +%s)
if [[ $cpu == 1 ]]; then
  part torchvision_gpu_decode skipped '"no GPU"'
else
  log "torchvision.io.decode_jpeg on the GPU"
  if timeout 90 "$python" scripts/bench/torchvision_gpu_decode.py "$big" --batch 256 --batches 24 \
       >"$out/torchvision-decode.json" 2>"$out/torchvision-decode.err"; then
    part torchvision_gpu_decode ok "$(tail -1 "$out/torchvision-decode.json")"
  else
    part torchvision_gpu_decode failed
  fi
fi

# ---- 8. the references, PyTorch on the same machine: torchvision's resnet50 training step (autocast +
# GradScaler for float16, channels_last, cudnn.benchmark, SGD momentum, part 5's warm-up and timed steps), and
# PyTorch's DataLoader with torchvision's transforms at 16 workers on the same folder and batch ----
# Both autocast dtypes, each with an operator profile of 5 steps: whether bfloat16's slower step (4,617 against
# 5,515 img/s here before) is ours or the kernels', and which operators take the difference.
for dtype in float16 bfloat16; do
  part_start=$(date +%s)
  log "PyTorch: resnet50 step, $dtype"
  ref_step=(--device cuda --arch resnet50 --size 224 --batch 256 --channels-last --amp "$dtype" --warmup 10 --steps 40
            --profile-steps 5)
  [[ $cpu == 1 ]] && ref_step=(--device cpu --arch resnet50 --size 64 --batch 8 --channels-last --amp bfloat16
                               --warmup 1 --steps 2 --profile-steps 1)
  if timeout 150 "$python" scripts/bench/resnet_step.py "${ref_step[@]}" >"$out/torch-step-$dtype.json" \
       2>"$out/torch-step-$dtype.err"; then
    part "torch_step_$dtype" ok "$(tail -1 "$out/torch-step-$dtype.json")"
  else
    part "torch_step_$dtype" failed
  fi
done
part_start=$(date +%s)
w=${workers_list##* }
log "PyTorch: DataLoader at $w workers"
if timeout 120 "$python" scripts/bench/data_pipeline.py "$big" --size "$size" --batch "$batch" --workers "$w" --warmup "$w" \
     --batches $((4 * w)) >"$out/torch-data.json" 2>"$out/torch-data.err"; then
  part torch_pipeline ok "$(tail -1 "$out/torch-data.json")"
else
  part torch_pipeline failed
fi

# ---- 9. NCCL with one rank through the built-in launcher: a short run completes (Gloo on the CPU) ----
part_start=$(date +%s)
backend=nccl; [[ $cpu == 1 ]] && backend=gloo
log "one rank, $backend"
rm -rf "$work/runs/one-rank"
timeout 120 "$trainer" --config "$work/photos.json" --nproc-per-node 1 --set run.dist_backend="$backend" --set train.epochs=1 \
  -o "$work/runs/one-rank" >"$out/one-rank.log" 2>&1; rc=$?
part one_rank "$([[ $rc == 0 && -f $work/runs/one-rank/last.pt ]] && echo ok || echo failed)" \
  "{\"exit\": $rc, \"backend\": \"$backend\", \"line\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$(grep -m1 'data-parallel' "$out/one-rank.log")")}"

# ---- 10. the TensorBoard event files of part 7's run, read by the tensorboard package's own reader (on the CPU
# without it: the tests' independent reader) ----
part_start=$(date +%s)
log "tensorboard"
tb=$("$python" - "$work/runs/photos12k-cpu" <<'PY2' 2>"$out/tensorboard.err"
import glob, json, os, sys
try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    reader = None
else:
    reader = "tensorboard"
files = glob.glob(os.path.join(sys.argv[1], "**", "events.out.tfevents.*"), recursive=True)
if reader:
    acc = EventAccumulator(os.path.dirname(files[0])).Reload()
    tags = acc.Tags()["scalars"]
    points = {t: len(acc.Scalars(t)) for t in tags}
else:
    import subprocess
    reader = "tests/interop/read_tensorboard.py"
    read = json.loads(subprocess.check_output([sys.executable, reader] + files))
    points = {}
    for f in read:
        for e in f["events"]:
            for t in e.get("values", {}):
                points[t] = points.get(t, 0) + 1
print(json.dumps({"reader": reader, "files": len(files), "scalars": points}))
PY2
) || tb=null
part tensorboard "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("ok" if d and d["scalars"].get("train/loss") and d["scalars"].get("eval/top1") and (d["reader"] == "tensorboard" or sys.argv[2] == "1") else "failed")' "$tb" "$cpu" 2>/dev/null || echo failed)" "$tb"

# ---- 11. deployment export on this LibTorch: TorchScript of the trained run, checked by export against the
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

# ---- the ratios the check is for: trainer step / PyTorch step, trainer pipeline / PyTorch pipeline (16
# workers each), training from JPEGs / the synthetic step, and the 16-worker scaling efficiency (16 against 8x
# the 2-worker rate) ----
part_start=$(date +%s)
ratios=$(python3 - "$results" <<'PY2'
import json, sys
parts = {p["part"]: p["result"] for p in map(json.loads, open(sys.argv[1])) if p["status"] == "ok"}
def get(part, *keys):
    v = parts.get(part)
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    return v
def ratio(a, b):
    return round(a / b, 3) if a and b else None
scaling = get("bench_data_scaling", "images_per_s_by_workers") or {}
counts = sorted(scaling, key=int)
print(json.dumps({
    "step_vs_pytorch": ratio(get("bench_resnet50_float16", "images_per_s"), get("torch_step_float16", "images_per_s")),
    "bfloat16_step_time_over_float16": {
        "trainer": ratio(get("bench_resnet50_float16", "images_per_s"), get("bench_resnet50_bfloat16", "images_per_s")),
        "pytorch": ratio(get("torch_step_float16", "images_per_s"), get("torch_step_bfloat16", "images_per_s"))},
    "pipeline_vs_pytorch": ratio(scaling.get(counts[-1]) if counts else None, get("torch_pipeline", "images_per_s")),
    "jpeg_vs_synthetic": ratio(get("train_from_jpeg_cpu_decode", "figures", "epoch2_images_per_s_median"),
                               get("bench_resnet50_float16", "images_per_s")),
    "jpeg_gpu_decode_vs_synthetic": ratio(get("train_from_jpeg_cuda_decode", "figures", "epoch2_images_per_s_median"),
                                          get("bench_resnet50_float16", "images_per_s")),
    "gpu_decode_pipeline_vs_torchvision_decode_jpeg": ratio(get("bench_data_gpu_decode", "images_per_s"),
                                                            get("torchvision_gpu_decode", "images_per_s")),
    "scaling_efficiency": ratio(scaling.get(counts[-1]), scaling.get(counts[0]) * int(counts[-1]) / int(counts[0]))
                          if len(counts) > 1 and scaling.get(counts[0]) else None,
    "targets": {"step_vs_pytorch": ">= 1", "pipeline_vs_pytorch": ">= 5", "scaling_efficiency": ">= 0.8",
                "jpeg_gpu_decode_vs_synthetic": ">= 0.9"}}))
PY2
) || ratios=null
part ratios "$([[ $ratios != null ]] && echo ok || echo failed)" "$ratios"

python3 -c "import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])], indent=1))" "$results" >"$out/gpu-check.json"
log "done: $out/gpu-check.json ($([[ $failed == 0 ]] && echo 'all parts ok' || echo 'some parts FAILED'))"
exit $failed
