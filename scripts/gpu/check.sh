#!/usr/bin/env bash
# The GPU check, run on the GPU machine (device tool) from the repository root, in calls that each fit one device
# command: a session is lent about 15 minutes of device time (a machine's start included) and 10 minutes a call,
# so each part's time limits add up to at most 570 s, and part 1 alone proves what matters most. Later parts
# follow on the same warm machine (its build and photos are reused; on a fresh machine they are made again,
# within the part's limits). Every part builds first (the kit from make_kit.sh, against the machine's own
# LibTorch, python3's torch), with the kit's paths given to CMake so that the machine's own headers never mix in.
#   part 1: build; the cuda tests (a skip is a failure); ResNet-50's synthetic step (float16, 224 px, batch 256,
#           channels_last) and PyTorch's eager step, A/B/A (ours, theirs, ours again); ResNet-50 trained 3 epochs
#           from 12,000 JPEGs decoded by nvJPEG; `bench data` with the GPU decode; every photo decoded by nvJPEG
#           and by the CPU path, compared image by image; then the gates: our step >= PyTorch's, JPEG training >=
#           0.9 of the synthetic step, >= 99% of epochs 2-3 decoded by nvJPEG with no CPU fallback, no failed
#           call and no blank image, and every image's pixels within tolerance. A short gate prints its figure
#           and does not stop the others; it makes the exit code non-zero.
#   part 2: resume with the GPU decode, bit-identical; NCCL with one rank (--nproc-per-node 1), the step's host
#           time; training from the JPEGs decoded by the CPU workers; torchvision.io.decode_jpeg on the GPU.
#   part 3: doctor; float16 and bfloat16 runs against a float32 run of the same seed (final loss and top-1 within
#           a stated tolerance, skipped steps counted, no NaN); bfloat16 steps (ours, PyTorch's); the float16
#           run's TensorBoard files read by the tensorboard package; TorchScript export and predict.
#   part 4: bench data at 2, 4, 8 and 16 workers; PyTorch's DataLoader at 16.
# Each part runs under a time limit of its own, records its status, seconds and limit, and a failure does not
# stop the parts after it. Results: OUT/gpu-check-N.json; the exit code is non-zero when any part failed.
#   scripts/gpu/check.sh [--part N] [KIT_TAR] [OUT]   defaults: part 1, build/gpu-kit/gpu-kit.tar.gz, $OUT
# Without a GPU (a dry run here, scripts/gpu/dry_run.sh) the CUDA parts skip or run on the CPU with small sizes:
# TRAINER_CHECK_CPU=1, with TRAINER_CHECK_SCALE=N to multiply every limit by N on a slower machine (2 cores build
# in minutes, not seconds).
set -uo pipefail
cd "$(dirname "$0")/../.."
which_part=1
if [[ ${1:-} == --part ]]; then which_part=$2; shift 2; fi
[[ $which_part =~ ^[1-4]$ ]] || { echo "check.sh: --part takes 1, 2, 3 or 4, not '$which_part'" >&2; exit 2; }
kit_tar=${1:-build/gpu-kit/gpu-kit.tar.gz}
out=$(mkdir -p "${2:-${OUT:-build/gpu-check}}" && cd "${2:-${OUT:-build/gpu-check}}" && pwd)
work=build/gpu
cpu=${TRAINER_CHECK_CPU:-0}
scale=${TRAINER_CHECK_SCALE:-1}
python=${TRAINER_CHECK_PYTHON:-python3}
mkdir -p "$work"
start=$(date +%s)
results=$out/parts-$which_part.jsonl
: >"$results"
failed=0
log() { echo "check $which_part [$(( $(date +%s) - start ))s]: $*" | tee -a "$out/check.log" >&2; }
json_string() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }
# begin NAME LIMIT: a part starts, with its time limit in seconds (each command of it runs under `within`).
begin() {
  part_name=$1; part_limit=$(( $2 * scale )); part_start=$(date +%s); limits_total=$(( ${limits_total:-0} + $2 ))
  log "$part_name (limit ${part_limit}s)"
}
# within CMD...: CMD under what is left of the part's limit (at least 1 s).
within() { timeout "$(( part_limit - ($(date +%s) - part_start) > 0 ? part_limit - ($(date +%s) - part_start) : 1 ))" "$@"; }
# record STATUS [JSON]: the part's line in the results. A part that does not apply here (a GPU part in a dry run)
# is "skipped", which is not a failure.
record() {
  printf '{"part": "%s", "status": "%s", "seconds": %d, "limit_s": %d, "result": %s}\n' "$part_name" "$1" \
    "$(( $(date +%s) - part_start ))" "$part_limit" "${2:-null}" >>"$results"
  [[ $1 == ok || $1 == skipped ]] || failed=1  # failed, or a short gate
}
finish() {
  mkdir -p "$work/results" && cp "$results" "$work/results/"
  python3 -c "import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])], indent=1))" "$results" \
    >"$out/gpu-check-$which_part.json"
  log "done in $(( $(date +%s) - start ))s, under limits that add to ${limits_total:-0}s on a GPU machine (570 at most): $out/gpu-check-$which_part.json ($([[ $failed == 0 ]] && echo 'all parts ok' || echo 'some parts FAILED or short'))"
  exit $failed
}
# The GPU's name, and whether it has JPEG engines (nvJPEG's hardware backend must be used there).
gpu_name=$([[ $cpu == 1 ]] && echo none || "$python" -c 'import torch; print(torch.cuda.get_device_name(0))' 2>/dev/null)
has_jpeg_engines() { [[ $gpu_name =~ (A100|A800|H100|H800|H200|GH200|B100|B200) ]]; }

# ---- build (every part; ninja reuses an earlier part's build on a warm machine). TRAINER_CHECK_BUILD=DIR: a
# build folder made already ----
# The kit format this build needs (make_kit.sh writes kit/FORMAT): 2 carries libjpeg-turbo's headers. An older kit
# would fail at configure minutes into a lent machine's time; it is refused before anything runs.
kit_format_needed=2
build=${TRAINER_CHECK_BUILD:-}
if [[ -z $build ]]; then
  [[ -f $kit_tar ]] || { echo "check.sh: no kit at $kit_tar: run scripts/gpu/make_kit.sh and carry build/gpu-kit" >&2; exit 2; }
  kit_format=$(tar -xzOf "$kit_tar" kit/FORMAT 2>/dev/null | cut -d' ' -f1)
  if [[ ! ${kit_format:-1} =~ ^[0-9]+$ ]] || (( ${kit_format:-1} < kit_format_needed )); then
    echo "check.sh: $kit_tar is a kit of format ${kit_format:-1} (no jpeg headers); this build needs format $kit_format_needed: run scripts/gpu/make_kit.sh and carry the new build/gpu-kit/gpu-kit.tar.gz" >&2
    exit 2
  fi
fi
begin build 240
if [[ -z $build ]]; then
  rm -rf "$work/kit" && tar -xzf "$kit_tar" -C "$work"
  kit=$(cd "$work/kit" && pwd)
  torch_cmake=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  # PyTorch's headers require C++20 from about 2.12 on (projects report 2.12 to 2.14): build as C++20 from 2.12.
  cxx_standard=$("$python" -c 'import torch; v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]); print(20 if v >= (2, 12) else 17)')
  log "LibTorch $("$python" -c 'import torch; print(torch.__version__, torch.version.cuda)'), building"
  # Everything besides LibTorch and CUDA from the kit, named explicitly; no downloads or ONNX export are checked
  # there, so libcurl and ONNX are left out rather than found in whatever the machine has. The cuda tests are asked
  # for by name: CMake builds them by default only with a CUDA LibTorch, and the dry run's is the CPU one.
  if within cmake -S . -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD="$cxx_standard" \
       -DTRAINER_PYTHON="$(command -v "$python")" \
       -DCMAKE_PREFIX_PATH="$kit/usr;$torch_cmake" -DZLIB_ROOT="$kit/usr/opencv" \
       -DJPEG_INCLUDE_DIR="$kit/usr/opencv/include" -DJPEG_LIBRARY="$kit/usr/opencv/lib/libjpeg.a" \
       -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON -DCMAKE_DISABLE_FIND_PACKAGE_ONNX=ON -DTRAINER_CUDA_TESTS=ON \
       >"$out/configure.log" 2>&1 &&
     within cmake --build "$work/build" --target trainer trainer_cuda_tests -- -k 0 >"$out/build.log" 2>&1; then
    record ok "{\"torch\": \"$("$python" -c 'import torch; print(torch.__version__)')\", \"gpu\": $(json_string "$gpu_name")}"
  else
    tail -n 40 "$out/configure.log" "$out/build.log" >&2
    record failed
    finish
  fi
  build=$work/build
  export LD_LIBRARY_PATH="$kit/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
else
  record ok '{"reused": true}'
fi
trainer=$build/trainer
nvjpeg=$([[ $("$trainer" --version) =~ nvJPEG ]] && echo 1 || echo 0)

# ---- the photo folder every run here reads: 12,000 training and 500 validation JPEGs from ten generated
# "photographs", written by every core (each image a function of its class and index, so the folder is the same
# however many write it; kept between parts on a warm machine) ----
photos() {
  begin photos 30
  local per_class=1200 val_per_class=50
  [[ $cpu == 1 ]] && { per_class=40; val_per_class=5; }
  big=$work/photos12k
  if [[ ! -f $big/val_label.txt ]] || [[ $(find "$big/train" -name '*.JPEG' | wc -l) != $((10 * per_class)) ]]; then
    rm -rf "$big"
    within "$python" - "$work/photo-sources" <<'PY'
# Ten smooth random "photographs" (low-frequency colour fields with texture): crops of one share its look.
import os, sys
import numpy as np
from PIL import Image
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
# The names make_photo_folder.py reads its ten classes from.
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
    within "$python" scripts/bench/make_photo_folder.py "$work/photo-sources" "$big" --per-class "$per_class" \
      --val-per-class "$val_per_class" --jobs "$(nproc)" >"$out/photos.log" 2>&1
  fi
  local images
  images=$(find "$big/train" -name '*.JPEG' | wc -l)
  record "$([[ $images == $((10 * per_class)) ]] && echo ok || echo failed)" \
    "{\"train_images\": $images, \"val_images\": $(find "$big/val" -name '*.JPEG' | wc -l)}"
}

# Sizes: ResNet-50 at 224 px, batch 256, float16 on the GPU; small CPU runs in a dry run.
device=cuda; amp=float16; arch=resnet50; size=224; batch=256; small_arch=resnet18; small_batch=128
[[ $cpu == 1 ]] && { device=cpu; amp=bfloat16; arch=resnet18; size=64; batch=32; small_batch=32; }
# run_config FILE NAME ARCH BATCH EPOCHS TENSORBOARD AMP: a run over the photo folder.
run_config() {
  cat >"$1" <<JSON
{
  "run": { "name": "$2", "output_dir": "$work/runs", "device": "$device", "plot": false, "tensorboard": $6 },
  "data": { "kind": "imagenet", "root": "$big", "batch_size": $4, "eval_batch_size": 256, "workers": $(nproc),
            "augment": { "image_size": $size } },
  "model": { "arch": "$3", "in_channels": 3, "num_classes": 10 },
  "optim": { "name": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-5 },
  "schedule": { "kind": "cosine", "warmup_epochs": 1 },
  "train": { "epochs": $5, "log_every": 5, "amp": { "enabled": true, "dtype": "$7" } }
}
JSON
}

# An nvJPEG part on a GPU machine must not skip; on an H100/H200 (JPEG engines) it must use the hardware backend.
# gpu_decode_applies: true when the GPU decode applies here; else records the part as skipped (a dry run) or
# failed (a GPU machine whose build has no nvJPEG).
gpu_decode_applies() {
  if [[ $cpu == 1 ]]; then record skipped '"no GPU (dry run)"'; return 1; fi
  if [[ $nvjpeg != 1 ]]; then record failed '"this build has no nvJPEG, on a GPU machine"'; return 1; fi
}
# decode_verdict LOG: failed with the reason when a GPU with JPEG engines decoded on the hybrid backend. The run's
# decode line says why, as the decoder found it (the nvJPEG call that failed and its status).
decode_verdict() {
  local line
  line=$(grep -m1 'decode:' "$1")
  if [[ $cpu != 1 ]] && has_jpeg_engines && [[ $line != *"hardware backend ("* ]]; then
    echo "failed: $gpu_name has JPEG engines but nvJPEG did not use them: ${line#*decode: }"
  fi
}

# ---- ResNet-50's synthetic step rate and memory (no input pipeline): the reference of the training parts ----
bench_step() {  # DTYPE LIMIT [TAG]: TAG names a second run of the same step (the A/B/A comparison's last A)
  local tag=${3:-}
  begin "bench_resnet50_$1${tag:+_$tag}" "$2"
  local bench=(bench --arch resnet50 --size 224 --batch 256 --channels-last --amp "$1" --warmup 10 --steps 30 --json)
  [[ $cpu == 1 ]] && bench=(bench --arch resnet50 --size 64 --batch 8 --channels-last --amp bfloat16 --warmup 1 --steps 2 --json)
  if within "$trainer" "${bench[@]}" >"$out/bench-$1$tag.json" 2>"$out/bench-$1$tag.err"; then
    record ok "$(tail -1 "$out/bench-$1$tag.json")"
  else
    record failed
  fi
}

# ---- PyTorch's ResNet-50 step as bench_step times ours (autocast + GradScaler for float16, channels_last,
# cudnn.benchmark, SGD momentum), with an operator profile of 5 steps ----
torch_step() {  # DTYPE LIMIT
  begin "torch_step_$1" "$2"
  local ref=(--device cuda --arch resnet50 --size 224 --batch 256 --channels-last --amp "$1" --warmup 10 --steps 30
             --profile-steps 5)
  # On the CPU, as many threads as ours (PyTorch's default is the physical cores: half of them with SMT).
  [[ $cpu == 1 ]] && ref=(--device cpu --arch resnet50 --size 64 --batch 8 --channels-last --amp bfloat16 --warmup 1
                          --steps 2 --profile-steps 1 --threads "$(nproc)")
  if within "$python" scripts/bench/resnet_step.py "${ref[@]}" >"$out/torch-step-$1.json" 2>"$out/torch-step-$1.err"; then
    record ok "$(tail -1 "$out/torch-step-$1.json")"
  else
    record failed
  fi
}

# ---- ResNet-50 training from the JPEG folder, EPOCHS epochs: img/s over epochs 2 on (the median of each epoch's
# middle intervals: neither cuDNN's autotuning nor an epoch's start and end), the data wait, and the images by
# decoder over those epochs, with the JPEGs decoded by the CPU workers or by nvJPEG (data.decode cuda). The dry
# run trains with the CPU decode (no GPU), so that this path and its figures still run ----
train_from_jpeg() {  # cpu|cuda LIMIT EPOCHS
  begin "train_from_jpeg_$1_decode" "$2"
  local decode=$1
  if [[ $decode == cuda && $cpu == 1 ]]; then
    decode=cpu
  elif [[ $decode == cuda ]]; then
    gpu_decode_applies || return
  fi
  run_config "$work/jpeg.json" jpeg "$arch" "$batch" "$3" true "$amp"
  rm -rf "$work/runs/jpeg-$1"
  within "$trainer" --config "$work/jpeg.json" --set data.decode="$decode" -o "$work/runs/jpeg-$1" \
    >"$out/train-jpeg-$1.log" 2>&1
  local rc=$? figures verdict
  figures=$(python3 - "$work/runs/jpeg-$1/metrics.jsonl" <<'PY' 2>/dev/null || echo null
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
later = [r for r in rows if r.get("kind") == "train" and r.get("epoch", 0) >= 2]
middle = []
for e in sorted({r["epoch"] for r in later}):
    rs = [r for r in later if r["epoch"] == e]
    middle += rs[1:-1] if len(rs) > 2 else rs
wait = sum(r["data_wait_s"] for r in later)
busy = wait + sum(r["compute_s"] for r in later)
keys = ("decoded_gpu", "decoded_cpu", "decode_refused", "decode_failed", "decode_failed_calls", "decode_blank")
epochs = [r for r in rows if r.get("kind") == "epoch" and r.get("epoch", 0) >= 2]
decoded = {k: sum(r.get(k) or 0 for r in epochs) for k in keys}
print(json.dumps({"later_epochs_images_per_s_median": statistics.median(r["images_per_s"] for r in middle),
                  "later_epochs_data_wait_share": wait / busy, "intervals": len(middle),
                  "later_epochs_decoded": decoded}))
PY
)
  verdict=$([[ $decode == cuda ]] && decode_verdict "$out/train-jpeg-$1.log")
  local status=ok
  [[ $rc == 0 && $figures != null ]] || status=failed
  [[ -n $verdict ]] && status=failed
  record "$status" "{\"exit\": $rc, \"arch\": \"$arch\", \"dtype\": \"$amp\", \"decode\": \"$decode\", \"figures\": $figures, \"decode_line\": $(json_string "$(grep -m1 'decode:' "$out/train-jpeg-$1.log")"), \"verdict\": $(json_string "$verdict")}"
}

# ---- every photo decoded by nvJPEG and by the CPU path at 224 px, compared image by image (the cuda test
# CudaDecode.EachImageIsCloseToTheCpuPath on the photo folder): up to 2,048 training crops and the 500 evaluation
# images, each image's mean and 99th-percentile |difference| and whether nvJPEG left it black ----
pixels() {
  begin pixels 35
  if ! gpu_decode_applies; then return; fi
  TRAINER_CHECK_PHOTOS=$big within "$build/trainer_cuda_tests" --gtest_filter=CudaDecode.EachImageIsCloseToTheCpuPath \
    >"$out/pixels.txt" 2>&1
  local rc=$? lines
  lines=$(grep -o 'pixels: .*' "$out/pixels.txt" | sed 's/^pixels: //' | paste -sd, -)
  record "$([[ $rc == 0 && -n $lines ]] && echo ok || echo failed)" "{\"exit\": $rc, \"splits\": [${lines}]}"
}

# ---- bench data with the GPU decode: the input pipeline alone, so that a low JPEG-training ratio can be put on
# the decode engine or on the pipeline ----
bench_data_gpu_decode() {
  begin bench_data_gpu_decode 30
  if gpu_decode_applies; then
    run_config "$work/jpeg.json" jpeg "$arch" "$batch" 2 false "$amp"
    if within "$trainer" bench data --config "$work/jpeg.json" --set data.decode=cuda --set run.threads=1 \
         --warmup 16 --batches 48 --json >"$out/bench-data-gpu.json" 2>"$out/bench-data-gpu.err"; then
      record ok "$(tail -1 "$out/bench-data-gpu.json")"
    else
      record failed
    fi
  fi
}

torchvision_gpu_decode() {
  begin torchvision_gpu_decode 40
  if [[ $cpu == 1 ]]; then
    record skipped '"no GPU (dry run)"'
  elif within "$python" scripts/bench/torchvision_gpu_decode.py "$big" --batch 256 --batches 24 \
         >"$out/torchvision-decode.json" 2>"$out/torchvision-decode.err"; then
    record ok "$(tail -1 "$out/torchvision-decode.json")"
  else
    record failed
  fi
}

# ---- the ratios and the gates: our step against PyTorch's, training from JPEGs against the synthetic step, the
# decode counts, the pixels, the GPU decode against torchvision's, the pipeline against PyTorch's and its scaling
# (of the parts this call ran, and an earlier call's on a warm machine). A gate whose figure this call did not
# measure is n/a; a short one fails the part, after every gate has printed ----
gates() {
  begin gates 5
  local r
  r=$(python3 - "$out" "$work/results" "$which_part" "$cpu" <<'PY'
import glob, json, statistics, sys
parts = {}
# This call's parts, and an earlier part's kept on this machine (build/gpu/results) when it is still warm.
files = sorted(glob.glob(sys.argv[2] + "/parts-*.jsonl")) + [sys.argv[1] + "/parts-%s.jsonl" % sys.argv[3]]
for f in dict.fromkeys(files):
    for p in map(json.loads, open(f)):
        if p["status"] == "ok":
            parts[p["part"]] = p["result"]
def get(part, *keys):
    v = parts.get(part)
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    return v
def ratio(a, b):
    return round(a / b, 3) if a and b else None
# Our step: the mean of the runs before and after PyTorch's (A/B/A), so that a drift of the GPU's clocks over the
# minute weighs on both sides alike.
ours = [x for x in (get("bench_resnet50_float16", "images_per_s"), get("bench_resnet50_float16_again", "images_per_s")) if x]
ours16 = statistics.mean(ours) if ours else None
jpeg = get("train_from_jpeg_cuda_decode", "figures", "later_epochs_images_per_s_median") \
    if get("train_from_jpeg_cuda_decode", "decode") == "cuda" else None
decoded = get("train_from_jpeg_cuda_decode", "figures", "later_epochs_decoded") \
    if get("train_from_jpeg_cuda_decode", "decode") == "cuda" else None
share = None
if decoded:
    total = sum(decoded.get(k) or 0 for k in ("decoded_gpu", "decoded_cpu", "decode_refused", "decode_failed"))
    share = round((decoded.get("decoded_gpu") or 0) / total, 4) if total else None
fallbacks = None if not decoded else sum(decoded.get(k) or 0 for k in ("decoded_cpu", "decode_failed_calls", "decode_blank"))
splits = get("pixels", "splits")
pixel_faults = None if not splits else sum(s["all_zero_images"] + s["images_over_tolerance"] for s in splits)
dry = sys.argv[4] == "1"  # a dry run's figures are the CPU's: shown, not gated
def gate(figure, target, passes):
    status = "n/a" if figure is None else ("ok" if passes(figure) else "short")
    return {"figure": figure, "target": target, "status": status + " (dry run, not gated)" if dry and figure is not None else status}
gates = {
    "step_vs_pytorch": gate(ratio(ours16, get("torch_step_float16", "images_per_s")), ">= 1.0", lambda x: x >= 1.0),
    "jpeg_gpu_decode_vs_synthetic": gate(ratio(jpeg, ours16), ">= 0.9", lambda x: x >= 0.9),
    "later_epochs_decoded_by_nvjpeg": gate(share, ">= 0.99", lambda x: x >= 0.99),
    "later_epochs_cpu_fallbacks_failed_calls_blank": gate(fallbacks, "== 0", lambda x: x == 0),
    "images_black_or_past_tolerance": gate(pixel_faults, "== 0", lambda x: x == 0),
}
scaling = get("bench_data_scaling", "images_per_s_by_workers") or {}
counts = sorted(scaling, key=int)
cpu_jpeg = get("train_from_jpeg_cpu_decode", "figures", "later_epochs_images_per_s_median")
print(json.dumps({
    "gates": gates,
    "jpeg_cpu_decode_vs_synthetic": ratio(cpu_jpeg, ours16),
    "gpu_decode_pipeline_vs_torchvision_decode_jpeg": ratio(get("bench_data_gpu_decode", "images_per_s"),
                                                            get("torchvision_gpu_decode", "images_per_s")),
    "bfloat16_step_time_over_float16": {
        "trainer": ratio(ours16, get("bench_resnet50_bfloat16", "images_per_s")),
        "pytorch": ratio(get("torch_step_float16", "images_per_s"), get("torch_step_bfloat16", "images_per_s"))},
    "pipeline_vs_pytorch": ratio(scaling.get(counts[-1]) if counts else None, get("torch_pipeline", "images_per_s")),
    "scaling_efficiency": ratio(scaling.get(counts[-1]), scaling.get(counts[0]) * int(counts[-1]) / int(counts[0]))
                          if len(counts) > 1 and scaling.get(counts[0]) else None,
    "targets": {"pipeline_vs_pytorch": ">= 5", "scaling_efficiency": ">= 0.8"}}))
PY
) || r=null
  if [[ $r == null ]]; then
    record failed
    return
  fi
  python3 -c 'import json,sys
for name, g in json.loads(sys.argv[1])["gates"].items():
    print("gate %-46s %-10s (%s) %s" % (name, g["figure"], g["target"], g["status"]))' "$r" | while read -r line; do log "$line"; done
  record "$(grep -q '"status": "short"' <<<"$r" && echo short || echo ok)" "$r"
}

# ---- part 1: the cuda tests, the synthetic step, training from JPEGs decoded by nvJPEG, PyTorch's step ----
cuda_tests() {
  begin cuda_tests 45
  (cd "$build" && within ctest -L cuda -V) >"$out/ctest-cuda.txt" 2>&1
  local rc=$? skipped
  skipped=$(grep -c '\[  SKIPPED \]' "$out/ctest-cuda.txt")
  local status=ok
  [[ $rc == 0 ]] || status=failed
  [[ $cpu != 1 && $skipped != 0 ]] && status=failed  # on a GPU every cuda test runs
  record "$status" "{\"exit\": $rc, \"skipped_tests\": $skipped, \"lines\": $(python3 -c 'import json,sys; print(json.dumps([l for l in open(sys.argv[1]).read().splitlines() if "tests passed" in l or "[  FAILED  ]" in l or "[  SKIPPED ]" in l or "decoder:" in l or "vs CPU path" in l or "damaged scan" in l][:40]))' "$out/ctest-cuda.txt")}"
}

# ---- part 2: resume with the GPU decode, NCCL with one rank, the CPU decode, the GPU decode's rate ----
resume_gpu_decode() {
  begin resume_gpu_decode 75
  local decode=cuda
  if [[ $cpu == 1 ]]; then
    decode=cpu  # the dry run checks the same path with the CPU decode
  elif [[ $nvjpeg != 1 ]]; then
    record failed '"this build has no nvJPEG, on a GPU machine"'
    return
  fi
  run_config "$work/resume.json" resume "$small_arch" "$small_batch" 2 false "$amp"
  local det=(--set run.deterministic=true --set train.checkpoint_every_steps=0 --set data.decode=$decode)
  rm -rf "$work/runs/straight" "$work/runs/split"
  within "$trainer" --config "$work/resume.json" "${det[@]}" -o "$work/runs/straight" >"$out/resume.log" 2>&1 &&
  within "$trainer" --config "$work/resume.json" "${det[@]}" -o "$work/runs/split" --stop-after-step 7 >>"$out/resume.log" 2>&1 &&
  within "$trainer" --resume "$work/runs/split/last.pt" >>"$out/resume.log" 2>&1 &&
  within "$trainer" export --checkpoint "$work/runs/straight/last.pt" -o "$work/straight.safetensors" >>"$out/resume.log" 2>&1 &&
  within "$trainer" export --checkpoint "$work/runs/split/last.pt" -o "$work/split.safetensors" >>"$out/resume.log" 2>&1
  local rc=$?
  if [[ $rc == 0 ]] && cmp -s "$work/straight.safetensors" "$work/split.safetensors"; then
    record ok "{\"identical\": true, \"decode\": \"$decode\"}"
  else
    record failed "{\"exit\": $rc, \"identical\": false, \"decode\": \"$decode\"}"
  fi
}

one_rank() {
  begin one_rank 40
  local backend=nccl
  [[ $cpu == 1 ]] && backend=gloo
  # bfloat16: no loss scaler, whose per-step check of the gradients waits for the GPU anyway.
  run_config "$work/one-rank.json" one-rank "$small_arch" "$small_batch" 1 false bfloat16
  rm -rf "$work/runs/one-rank"
  within "$trainer" --config "$work/one-rank.json" --nproc-per-node 1 --set run.dist_backend="$backend" \
    -o "$work/runs/one-rank" >"$out/one-rank.log" 2>&1
  local rc=$? steps
  # The step's host time against its wall time: well under 1 when nothing waits for the GPU every step.
  steps=$(python3 - "$work/runs/one-rank/metrics.jsonl" "$small_batch" <<'PY' 2>/dev/null || echo null
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
rows = [r for r in rows if r.get("kind") == "train"][1:]  # past the first interval (cuDNN's autotuning)
batch = int(sys.argv[2])
host_ms = statistics.median(1000 * r["compute_s"] / max(1, r["images_per_s"] * (r["compute_s"] + r["data_wait_s"]) / batch) for r in rows)
step_ms = statistics.median(1000 * batch / r["images_per_s"] for r in rows)
print(json.dumps({"host_ms_per_step": round(host_ms, 2), "wall_ms_per_step": round(step_ms, 2),
                  "host_share": round(host_ms / step_ms, 3), "intervals": len(rows)}))
PY
)
  record "$([[ $rc == 0 && -f $work/runs/one-rank/last.pt ]] && echo ok || echo failed)" \
    "{\"exit\": $rc, \"backend\": \"$backend\", \"steps\": $steps, \"line\": $(json_string "$(grep -m1 'data-parallel' "$out/one-rank.log")")}"
}

# ---- part 3: doctor, float16 and bfloat16 against float32, the bfloat16 steps, TensorBoard, TorchScript ----
doctor() {
  begin doctor 15
  within "$trainer" doctor >"$out/doctor.txt" 2>&1
  local rc=$?
  record "$([[ $rc == 0 ]] && echo ok || echo failed)" "$(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read().splitlines()))' "$out/doctor.txt")"
}

# ---- float16 and bfloat16 against float32, the same seed: ResNet-18 on the photo folder, 2 epochs (1 in a dry
# run, where float16 does not run on the CPU). Each must end without a NaN, with its final training loss within
# 0.1 + 10% of float32's and its validation top-1 within 0.05 of it, and float16's skipped steps (the loss
# scaler finding its scale) under 2% of the steps. The float16 run (bfloat16 in a dry run) is the "amp" run that
# the TensorBoard and TorchScript parts read ----
convergence() {
  begin convergence 120
  local epochs=2 dtypes=(float32 float16 bfloat16) dtype name rc=0
  [[ $cpu == 1 ]] && { epochs=1; dtypes=(float32 bfloat16); }
  for dtype in "${dtypes[@]}"; do
    name=conv-$dtype
    [[ $dtype == "$amp" ]] && name=amp
    run_config "$work/$name.json" "$name" "$small_arch" "$small_batch" "$epochs" "$([[ $name == amp ]] && echo true || echo false)" \
      "$([[ $dtype == float32 ]] && echo float16 || echo "$dtype")"
    rm -rf "$work/runs/$name"
    within "$trainer" --config "$work/$name.json" --set run.seed=7 --set train.amp.enabled="$([[ $dtype == float32 ]] && echo false || echo true)" \
      >"$out/train-$name.log" 2>&1 || rc=$?
  done
  local figures
  figures=$(python3 - "$work/runs" "$amp" "${dtypes[@]}" <<'PY' 2>/dev/null || echo null
import json, math, sys
runs, amp, dtypes = sys.argv[1], sys.argv[2], sys.argv[3:]
out = {}
for d in dtypes:
    rows = [json.loads(l) for l in open("%s/%s/metrics.jsonl" % (runs, "amp" if d == amp else "conv-" + d))]
    epochs = [r for r in rows if r.get("kind") == "epoch"]
    evals = [r for r in rows if r.get("kind") == "eval"]
    train = [r for r in rows if r.get("kind") == "train"]
    losses = [r["loss"] for r in rows if isinstance(r.get("loss"), (int, float))]
    out[d] = {"final_loss": epochs[-1]["loss"], "val_top1": evals[-1]["top1"], "steps": epochs[-1]["step"],
              "skipped_steps": sum(r.get("skipped_steps") or 0 for r in train),
              "nan": any(not math.isfinite(x) for x in losses)}
ref = out["float32"]
verdicts = {}
for d in dtypes[1:]:
    o = out[d]
    verdicts[d] = (not o["nan"] and abs(o["final_loss"] - ref["final_loss"]) <= 0.1 + 0.1 * ref["final_loss"]
                   and abs(o["val_top1"] - ref["val_top1"]) <= 0.05 and o["skipped_steps"] <= 0.02 * o["steps"])
out["within_tolerance"] = verdicts
out["tolerance"] = {"final_loss": "0.1 + 10% of float32's", "val_top1": 0.05, "skipped_steps": "2% of steps"}
print(json.dumps(out))
PY
)
  local status=ok
  [[ $rc == 0 && $figures != null ]] || status=failed
  [[ $status == ok && $cpu != 1 ]] && grep -q false <<<"$(python3 -c 'import json,sys; print(list(json.loads(sys.argv[1])["within_tolerance"].values()))' "$figures")" && status=failed
  record "$status" "{\"exit\": $rc, \"figures\": $figures}"
}

tensorboard() {
  begin tensorboard 20
  local tb
  tb=$(within "$python" - "$work/runs/amp" <<'PY' 2>"$out/tensorboard.err"
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
    points = {t: len(acc.Scalars(t)) for t in acc.Tags()["scalars"]}
else:
    import subprocess
    reader = "tests/interop/read_tensorboard.py"
    points = {}
    for f in json.loads(subprocess.check_output([sys.executable, reader] + files)):
        for e in f["events"]:
            for t in e.get("values", {}):
                points[t] = points.get(t, 0) + 1
print(json.dumps({"reader": reader, "files": len(files), "scalars": points}))
PY
) || tb=null
  record "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("ok" if d and d["scalars"].get("train/loss") and d["scalars"].get("eval/top1") and (d["reader"] == "tensorboard" or sys.argv[2] == "1") else "failed")' "$tb" "$cpu" 2>/dev/null || echo failed)" "$tb"
}

export_torchscript() {
  begin export_torchscript 35
  local files
  files=$(ls "$big"/val/* | head -2 | tr '\n' ' ')
  # shellcheck disable=SC2086
  if within "$trainer" export --checkpoint "$work/runs/amp/best.pt" -o "$work/amp.ts.pt" >"$out/export.log" 2>&1 &&
     within "$trainer" predict --checkpoint "$work/runs/amp/best.pt" $files --json >"$work/predict-ck.json" 2>>"$out/export.log" &&
     within "$trainer" predict --trust-model --model "$work/amp.ts.pt" $files --json >"$work/predict-ts.json" 2>>"$out/export.log"; then
    local same
    same=$(python3 -c 'import json,sys
a, b = (json.loads(open(f).read())["predictions"] for f in sys.argv[1:3])
print(str([p["top"][0]["class"] for p in a] == [p["top"][0]["class"] for p in b]).lower())' "$work/predict-ck.json" "$work/predict-ts.json")
    record "$([[ $same == true ]] && echo ok || echo failed)" \
      "{\"same_top1\": $same, \"checked\": $(json_string "$(grep checked: "$out/export.log")")}"
  else
    record failed
  fi
}

# ---- part 4: the CPU pipeline's scaling (bench data, data.decode cpu, each past a warm-up round of a batch per
# worker, over 4 batches per worker) and PyTorch's DataLoader at the most workers ----
data_scaling() {
  local workers_list="2 4 8 16"
  [[ $cpu == 1 ]] && workers_list="1 2"
  begin bench_data_scaling 190
  run_config "$work/jpeg.json" jpeg "$arch" "$batch" 2 false "$amp"
  local scaling="{" w
  for w in $workers_list; do
    if within "$trainer" bench data --config "$work/jpeg.json" --set data.workers="$w" --set run.threads=1 \
         --set data.decode=cpu --warmup "$w" --batches $((4 * w)) --json >"$out/bench-data-$w.json" 2>"$out/bench-data-$w.err"; then
      scaling+="\"$w\": $(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["images_per_s"])' "$out/bench-data-$w.json"), "
    else
      scaling+="\"$w\": null, "
    fi
  done
  scaling="${scaling%, }}"
  record "$(grep -q null <<<"$scaling" && echo failed || echo ok)" "{\"images_per_s_by_workers\": $scaling}"
  begin torch_pipeline 60
  if within "$python" scripts/bench/data_pipeline.py "$big" --size "$size" --batch "$batch" --workers "$w" --warmup "$w" \
       --batches $((4 * w)) >"$out/torch-data.json" 2>"$out/torch-data.err"; then
    record ok "$(tail -1 "$out/torch-data.json")"
  else
    record failed
  fi
}

# Each part's limits add up to at most 570 s (9.5 minutes), with the build's 240, the photos' 30 and the gates' 5:
# part 1 240 + 45 + 25 + 30 + 40 + 25 + 90 + 30 + 35 + 5 = 565; part 2 240 + 30 + 75 + 40 + 55 + 40 + 5 = 485;
# part 3 240 + 30 + 15 + 120 + 20 + 35 + 35 + 60 + 5 = 560; part 4 240 + 30 + 190 + 60 + 5 = 525. finish prints
# the sum this call ran under (TRAINER_CHECK_SCALE multiplies it in a dry run).
case $which_part in
  1) cuda_tests; bench_step float16 25; photos; torch_step float16 40; bench_step float16 25 again
     train_from_jpeg cuda 90 3; bench_data_gpu_decode; pixels ;;
  2) photos; resume_gpu_decode; one_rank; train_from_jpeg cpu 55 2; torchvision_gpu_decode ;;
  3) photos; doctor; convergence; tensorboard; export_torchscript; bench_step bfloat16 35; torch_step bfloat16 60 ;;
  4) photos; data_scaling ;;
esac
gates
finish
