#!/usr/bin/env bash
# The fine-tuning figures of README's "Fine-tune on your own photos": does starting from pretrained weights pay,
# on real images, as it does for a user with torchvision's ImageNet weights and a few hundred photos?
#   1. pretrain resnet18 on Fashion-MNIST classes 0-4 (PRE_PER_CLASS images each) and export its state dict;
#   2. publish it as torch.hub does (NAME-<sha256 prefix>.pth) on a loopback server (tests/support/weights_server.py);
#   3. fine-tune on classes 5-9 with 50 photos per class and data.val_fraction 0.2, SEEDS seeds each: from the
#      served weights (fetched into a fresh TORCH_HOME: the download rate), from scratch, and from the weights with
#      everything but fc frozen;
#   4. evaluate every best.pt on the 5000 test images of classes 5-9.
# Prints each run and the medians over the seeds, and the start-up to the first step with a download and with the
# file in the cache.
#   scripts/bench/finetune.sh [SEEDS]      SEEDS default 3; PRE_PER_CLASS (1000), PRE_EPOCHS (3), EPOCHS (15)
# ARCH (resnet18) picks the model; "frozen" then freezes all but its head (resnet: conv1, bn1, layer*; the other
# families: features.*). EXTRA: more --set options for every run, after the script's own (an optimizer, say).
#   ARCH=convnext_tiny EXTRA="--set optim.name=adamw --set optim.lr=0.001 --set optim.weight_decay=0.05" \
#     scripts/bench/finetune.sh 1
set -euo pipefail
cd "$(dirname "$0")/../.."
seeds="${1:-3}"
bin=$PWD/build/release/trainer
py=/usr/bin/python3
idx=/usr/share/datasets/fashion-mnist
[[ -x $bin ]] || { echo "build first: $bin" >&2; exit 1; }
work=$(mktemp -d)
server=""
trap '[[ -n $server ]] && kill $server; rm -rf "$work"' EXIT
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# ---- the data: pretraining folders, the "photos", and the test images of the photos' classes ----
$py scripts/bench/fashion_folders.py $idx $work/pre/train --classes 0,1,2,3,4 --per-class "${PRE_PER_CLASS:-1000}"
$py scripts/bench/fashion_folders.py $idx $work/pre/val --classes 0,1,2,3,4 --per-class 200 --split t10k
$py scripts/bench/fashion_folders.py $idx $work/my_photos --classes 5,6,7,8,9 --per-class 50
$py scripts/bench/fashion_folders.py $idx $work/test/val --classes 5,6,7,8,9 --per-class 1000 --split t10k
ln -s $work/my_photos $work/test/train  # the classes, as the photos name them

arch=${ARCH:-resnet18}
read -r -a extra_sets <<< "${EXTRA:-}"
arch_sets=(--set model.arch=$arch)
freeze='["features.*"]'
if [[ $arch == resnet* ]]; then
  arch_sets+=(--set model.stem=small)
  freeze='["conv1.*","bn1.*","layer*"]'
fi
common=(--set data.kind=imagenet --set data.batch_size=32 --set data.eval_batch_size=200 --set data.workers=2
        --set data.augment.image_size=32 --set data.augment.eval_crop=32 --set data.augment.eval_resize=32
        --set data.augment.scale=[0.5,1] "${arch_sets[@]}" --set model.in_channels=3
        --set run.threads=2 --set run.plot=false --set run.tensorboard=false --set train.log_every=1000)

# ---- 1. pretraining ----
printf '{"$schema": "schema.json"}\n' > $work/base.json
$bin --config $work/base.json "${common[@]}" --set data.root=$work/pre --set optim.lr=0.02 --set schedule.warmup_epochs=1 \
  --set optim.weight_decay=0.0001 --set schedule.kind=cosine --set train.epochs="${PRE_EPOCHS:-3}" "${extra_sets[@]}" \
  -o $work/pretrain > $work/pretrain.log || { tail -3 $work/pretrain.log >&2; exit 1; }
grep -o "finished.*best top1 [0-9.]*" $work/pretrain.log | sed 's/^/pretraining: /'
$bin export --checkpoint $work/pretrain/best.pt --output $work/pre.safetensors > /dev/null

# ---- 2. published as torch.hub names its files, served on loopback ----
mkdir -p $work/served
name="fmnist_$arch-$(sha256sum $work/pre.safetensors | cut -c1-8).pth"
cp $work/pre.safetensors $work/served/$name
$py tests/support/weights_server.py $work/served $work/port $work/requests.log > /dev/null 2>&1 &
server=$!
for _ in $(seq 100); do [[ -f $work/port ]] && break; sleep 0.1; done
address="http://127.0.0.1:$(cat $work/port)/$name"
echo "weights: $address ($(stat -c %s $work/served/$name) bytes)"

# ---- 3. fine-tuning: pretrained, scratch, frozen backbone ----
tune=("${common[@]}" --set data.root=$work/my_photos --set data.val_fraction=0.2 --set optim.lr=0.01
      --set optim.weight_decay=0.0001 --set schedule.kind=cosine --set schedule.warmup_epochs=1
      --set train.label_smoothing=0.1 --set train.epochs="${EPOCHS:-15}" "${extra_sets[@]}")
declare -A test_top1 val_top1
for seed in $(seq "$seeds"); do
  for variant in pretrained scratch frozen; do
    extra=()
    [[ $variant != scratch ]] && extra+=(--set model.weights=$address)
    [[ $variant == frozen ]] && extra+=(--set "model.freeze=$freeze")
    out=$work/$variant-$seed
    TORCH_HOME=$work/th-$variant-$seed $bin --config $work/base.json "${tune[@]}" "${extra[@]}" \
      --set run.seed=$seed -o $out > $out.log 2>&1 || { echo "$variant seed $seed failed:" >&2; tail -3 $out.log >&2; exit 1; }
    [[ $variant == pretrained && $seed == 1 ]] && grep -o "$name: [0-9.]* MB in .*/s)" $out.log | sed 's/^/download: /'
    val=$(grep -o "best top1 [0-9.]*" $out.log | tail -1 | awk '{print $3}')
    test=$($bin eval --checkpoint $out/best.pt --config $work/base.json "${common[@]}" --set data.root=$work/test \
             --output-dir $out/test | grep -o "top1 [0-9.]*" | head -1 | awk '{print $2}')
    val_top1[$variant]+="$val "
    test_top1[$variant]+="$test "
    echo "seed $seed $variant: held-out val top1 $val, test top1 $test (5000 images)"
  done
done
for variant in pretrained scratch frozen; do
  echo "median $variant: held-out val top1 $(median ${val_top1[$variant]}), test top1 $(median ${test_top1[$variant]})"
done

# ---- 4. start-up: a run to its first step, with the weights downloaded, and from the cache ----
for where in download cache; do
  home=$work/th-startup
  [[ $where == download ]] && rm -rf $home
  start=$(date +%s.%N)
  TORCH_HOME=$home $bin --config $work/base.json "${tune[@]}" --set model.weights=$address \
    --stop-after-step 1 -o $work/startup-$where > /dev/null 2>&1
  echo "start-up to the first step ($where): $($py -c "print(round($(date +%s.%N) - $start, 2))") s (with the checkpoint it saves)"
done
