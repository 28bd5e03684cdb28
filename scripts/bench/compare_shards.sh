#!/usr/bin/env bash
# The ImageNet training input pipeline (`trainer bench data`: read, reduced JPEG decode, RandomResizedCrop, flip,
# batch, normalise) on the same photos three ways, side by side on the same cores, taking turns to go first: the
# image folder, its WebDataset shards on the disk (`trainer shards make`, mapped), and the same shards from a
# loopback HTTP server (tests/support/weights_server.py: one thread per connection, range requests). Also
# `trainer shards make`'s rate (MB/s, medians of RUNS packs into fresh folders), the bytes the HTTP run fetched per
# byte of image it used (its server's log), and, where the page cache can be dropped (root, /proc/sys/vm), a
# first-read figure for the folder against the shards, each read once right after a drop.
#   scripts/bench/compare_shards.sh [RUNS]     PER_CLASS=400 (4,000 photos) BATCHES=60 WARMUP=8 WORKERS=2 SHARD_MB=64
set -euo pipefail
cd "$(dirname "$0")/../.."
runs="${1:-3}"
per_class="${PER_CLASS:-400}"; batches="${BATCHES:-60}"; warmup="${WARMUP:-8}"; workers="${WORKERS:-2}"
shard_mb="${SHARD_MB:-64}"
trainer=$PWD/build/release/trainer
[[ -x $trainer ]] || { echo "build first: scripts/build.sh release --target trainer" >&2; exit 1; }
work=$PWD/build/bench-shards
root=$work/photos$per_class
mkdir -p "$work"
source scripts/bench/photos.sh
photos=$(sample_photos "$work")
[[ -d $root/train ]] || /usr/bin/python3 scripts/bench/make_photo_folder.py "$photos" "$root" --per-class "$per_class" \
  --jobs 2 >/dev/null
field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# shards make, timed; the last pack is the one the runs read.
make_rates=()
for i in $(seq "$runs"); do
  rm -rf "$work/shards"
  start=$(date +%s.%N)
  "$trainer" shards make "$root" "$work/shards" --shard-mb "$shard_mb" >/dev/null
  end=$(date +%s.%N)
  mb=$(du -sb --apparent-size "$work/shards" | awk '{print $1 / 1e6}')
  make_rates+=("$(awk -v mb="$mb" -v s="$start" -v e="$end" 'BEGIN {printf "%.1f", mb / (e - s)}')")
  echo "shards make run $i: ${make_rates[-1]} MB/s ($mb MB)"
done
"$trainer" shards check "$work/shards" | tail -1

rm -f "$work/port" "$work/requests.log"
/usr/bin/python3 tests/support/weights_server.py "$work/shards" "$work/port" "$work/requests.log" >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for _ in $(seq 100); do [[ -f $work/port ]] && break; sleep 0.1; done
port=$(cat "$work/port")

config() {  # kind root
  cat > "$work/$1.json" <<JSON
{"run": {"threads": 2},
 "data": {"kind": "$2", "root": "$3", "batch_size": 64, "workers": $workers, "prefetch": 4},
 "model": {"arch": "resnet50", "in_channels": 3, "num_classes": 10, "channels_last": true}}
JSON
  echo "$work/$1.json"
}
folder=$(config folder imagenet "$root"); disk=$(config disk shards "$work/shards")
http=$(config http shards "http://127.0.0.1:$port")
declare -A rates reads
server_cpu=()  # the server's CPU seconds during each HTTP run: time taken from the same 2 cores
cpu_of() { awk '{print ($14 + $15) / '"$(getconf CLK_TCK)"'}' "/proc/$1/stat"; }
read_ms() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["stages"]["workers"][0]["median_ms"]["read"])' "$1"; }
ways=(folder disk http)
for i in $(seq "$runs"); do
  line="run $i:"
  for k in 0 1 2; do
    way=${ways[$(( (k + i) % 3 ))]}
    [[ $way == http ]] && : > "$work/requests.log" && before=$(cpu_of $server) && start=$(date +%s.%N)
    out=$("$trainer" bench data --config "${!way}" --warmup "$warmup" --batches "$batches" --json)
    [[ $way == http ]] && server_cpu+=("$(awk -v a="$before" -v b="$(cpu_of $server)" -v s="$start" -v e="$(date +%s.%N)" \
      'BEGIN {printf "%.2f", (b - a) / (e - s)}')")
    rates[$way]+=" $(field "$out" images_per_s)"
    reads[$way]+=" $(read_ms "$out")"
    line+=" $way $(printf '%.1f' "$(field "$out" images_per_s)") img/s"
  done
  echo "$line"
done
# The last HTTP run's requests: bytes of image members fetched against the bytes the pipeline decoded (every range is
# one image member), and what the start-up fetched (summary and indexes).
amp=$(/usr/bin/python3 - "$work/requests.log" "$work/shards" <<'PY'
import os, re, sys
log, shards = sys.argv[1], sys.argv[2]
ranged = whole = 0
for line in open(log):
    m = re.search(r"GET /(\S+) range=bytes=(\d+)-(\d+)", line)
    if m:
        ranged += int(m.group(3)) - int(m.group(2)) + 1
    else:
        name = line.split()[1].lstrip("/")
        whole += os.path.getsize(os.path.join(shards, name))
print("%d %d" % (ranged, whole))
PY
)
read -r ranged whole <<<"$amp"
echo "medians of $runs runs, $batches batches of 64 at 224 px after $warmup, $workers workers, $(find "$root/train" -type f | wc -l) photos:"
mf=$(median ${rates[folder]}); md=$(median ${rates[disk]}); mh=$(median ${rates[http]})
awk -v f="$mf" -v d="$md" -v h="$mh" 'BEGIN {
  printf "  folder %.1f img/s | shards on disk %.1f img/s (%.2f of the folder) | shards over loopback HTTP %.1f img/s (%.2f)\n", f, d, d / f, h, h / f }'
echo "  median read time per image in a worker: folder $(median ${reads[folder]}) ms, shards on disk $(median ${reads[disk]}) ms, over HTTP $(median ${reads[http]}) ms"
echo "  the loopback server used $(median "${server_cpu[@]}") cores' worth of CPU during the HTTP runs (the same 2 cores the pipeline decodes on)"
echo "  shards make: $(median "${make_rates[@]}") MB/s (median)"
awk -v r="$ranged" -v w="$whole" 'BEGIN {
  printf "  HTTP run: %.1f MB of image ranges fetched, 1.00 byte per byte decoded (a range is one member); start-up fetched %.3f MB (shards.json and indexes)\n", r / 1e6, w / 1e6 }'

# First reads after the page cache is dropped: the folder (one open per photo) against the shards (mapped).
if [[ -w /proc/sys/vm/drop_caches ]] && sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
  for way in folder disk; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    out=$("$trainer" bench data --config "${!way}" --warmup 0 --batches "$batches" --json)
    printf '  after dropping the page cache, %s: %.1f img/s (read %.3f ms per image)\n' "$way" "$(field "$out" images_per_s)" "$(read_ms "$out")"
  done
else
  echo "  (the page cache cannot be dropped here: no cold-read figure)"
fi
