#!/usr/bin/env bash
# The ImageNet training input pipeline (`trainer bench data`: read, reduced JPEG decode, RandomResizedCrop, flip,
# batch, normalise) on the same photos, side by side on the same cores, taking turns to go first: the image folder,
# its WebDataset shards on the disk (`trainer shards make`), and the same shards over loopback HTTP from
# tests/support/weights_server.py (Python, one thread per connection, range requests), with the read-ahead
# (data.shards.read_ahead, the default 8 connections) and without it (0: each worker fetches its own image), and,
# where nginx is installed (`apt-get install nginx-light`), from nginx (one worker process), a server that takes
# far less of the cores the decoders need; and over HTTP with every shard already copied into the cache
# (data.shards.cache_mb: the copies are made by untimed runs first). Also `trainer shards make`'s rate (MB/s, medians of RUNS packs into fresh
# folders), the bytes the HTTP run fetched per byte of image it used (its server's log), and, where the page cache
# can be dropped (root, /proc/sys/vm), a first-read figure for the folder against the shards, each read once right
# after a drop.
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
servers=("$!")
trap 'kill "${servers[@]}" 2>/dev/null' EXIT
for _ in $(seq 100); do [[ -f $work/port ]] && break; sleep 0.1; done
port=$(cat "$work/port")
ways=(folder disk http http0)
if command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]]; then
  nginx_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat > "$work/nginx.conf" <<CONF
daemon off; worker_processes 1; user root; pid $work/nginx.pid; error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  log_format ranges '\$request_method \$uri range=\$http_range';
  access_log $work/nginx-requests.log ranges;
  sendfile on; tcp_nodelay on; keepalive_requests 1000000;
  server { listen 127.0.0.1:$nginx_port; root $work/shards; }
}
CONF
  "$(command -v nginx || echo /usr/sbin/nginx)" -c "$work/nginx.conf" -e "$work/nginx-error.log" &
  servers+=("$!")
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$nginx_port/shards.json" -o /dev/null && break; sleep 0.1; done
  ways+=(nginx nginx0)
fi

config() {  # name kind root [read_ahead [cache_mb]]
  cat > "$work/$1.json" <<JSON
{"run": {"threads": 2},
 "data": {"kind": "$2", "root": "$3", "batch_size": 64, "workers": $workers, "prefetch": 4,
          "shards": {"read_ahead": ${4:-8}, "cache": "$work/cache", "cache_mb": ${5:-0}}},
 "model": {"arch": "resnet50", "in_channels": 3, "num_classes": 10, "channels_last": true}}
JSON
  echo "$work/$1.json"
}
folder=$(config folder imagenet "$root"); disk=$(config disk shards "$work/shards")
http=$(config http shards "http://127.0.0.1:$port"); http0=$(config http0 shards "http://127.0.0.1:$port" 0)
cached=$(config cached shards "http://127.0.0.1:$port" 8 1000000)
ways+=(cached)
# The cache filled before the timed runs: untimed runs until every train shard has its copy (the copier stops with
# its run; a shard whose copy was cut short is copied again by the next).
rm -rf "$work/cache"
train_shards=$(find "$work/shards" -name 'train-*.tar' | wc -l)
for _ in $(seq 10); do
  [[ $(find "$work/cache" -name '*-train-*.tar' 2>/dev/null | wc -l) -ge $train_shards ]] && break
  "$trainer" bench data --config "$cached" --warmup 0 --batches "$batches" --json >/dev/null
done
echo "cache filled: $(find "$work/cache" -name '*-train-*.tar' | wc -l) of $train_shards train shards copied"
if [[ -n ${nginx_port:-} ]]; then
  nginx=$(config nginx shards "http://127.0.0.1:$nginx_port"); nginx0=$(config nginx0 shards "http://127.0.0.1:$nginx_port" 0)
fi
declare -A rates reads server_cpu
# A server's CPU seconds per second of an HTTP run: time taken from the same 2 cores (nginx: its worker process).
cpu_of() { awk '{print ($14 + $15) / '"$(getconf CLK_TCK)"'}' "/proc/$1/stat"; }
server_pid() {
  case $1 in
    nginx | nginx0) pgrep -P "${servers[1]}" | head -1 ;;
    http | http0) echo "${servers[0]}" ;;
  esac
}
read_ms() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["stages"]["workers"][0]["median_ms"]["read"])' "$1"; }
for i in $(seq "$runs"); do
  line="run $i:"
  for k in $(seq 0 $(( ${#ways[@]} - 1 ))); do
    way=${ways[$(( (k + i) % ${#ways[@]} ))]}
    pid=$(server_pid "$way")
    [[ $way == http* ]] && : > "$work/requests.log"
    [[ -n $pid ]] && before=$(cpu_of "$pid") && start=$(date +%s.%N)
    out=$("$trainer" bench data --config "${!way}" --warmup "$warmup" --batches "$batches" --json)
    [[ -n $pid ]] && server_cpu[$way]+=" $(awk -v a="$before" -v b="$(cpu_of "$pid")" -v s="$start" -v e="$(date +%s.%N)" \
      'BEGIN {printf "%.2f", (b - a) / (e - s)}')"
    rates[$way]+=" $(field "$out" images_per_s)"
    reads[$way]+=" $(read_ms "$out")"
    line+=" $way $(printf '%.1f' "$(field "$out" images_per_s)") img/s"
    [[ $way == http ]] && cp "$work/requests.log" "$work/requests-read-ahead.log"
  done
  echo "$line"
done
# The last run with the read-ahead's requests: bytes of image members fetched against the bytes the pipeline decoded
# (every range is one image member), and what the start-up fetched (summary and indexes).
amp=$(/usr/bin/python3 - "$work/requests-read-ahead.log" "$work/shards" <<'PY'
import os, re, sys
log, shards = sys.argv[1], sys.argv[2]
ranged = whole = 0
seen = set()
repeats = 0
for line in open(log):
    m = re.search(r"GET /(\S+) range=bytes=(\d+)-(\d+)", line)
    if m:
        ranged += int(m.group(3)) - int(m.group(2)) + 1
        repeats += m.groups() in seen
        seen.add(m.groups())
    else:
        name = line.split()[1].lstrip("/")
        whole += os.path.getsize(os.path.join(shards, name))
print("%d %d %d" % (ranged, whole, repeats))
PY
)
read -r ranged whole repeats <<<"$amp"
echo "medians of $runs runs, $batches batches of 64 at 224 px after $warmup, $workers workers, $(find "$root/train" -type f | wc -l) photos:"
mf=$(median ${rates[folder]})
for way in "${ways[@]}"; do
  case $way in
    folder) what="image folder" ;; disk) what="shards on disk" ;;
    http) what="shards over loopback HTTP, Python server, read-ahead 8" ;;
    http0) what="shards over loopback HTTP, Python server, no read-ahead" ;;
    nginx) what="shards over loopback HTTP, nginx, read-ahead 8" ;;
    nginx0) what="shards over loopback HTTP, nginx, no read-ahead" ;;
    cached) what="shards over loopback HTTP, every one copied in the cache" ;;
  esac
  m=$(median ${rates[$way]})
  cpu=""
  [[ -n ${server_cpu[$way]:-} ]] && cpu=", server $(median ${server_cpu[$way]}) cores"
  awk -v m="$m" -v f="$mf" -v w="$what" -v r="$(median ${reads[$way]})" -v c="$cpu" \
    'BEGIN {printf "  %-58s %7.1f img/s  %.2f of the folder  read %.4f ms per image%s\n", w, m, m / f, r, c}'
done
echo "  shards make: $(median "${make_rates[@]}") MB/s (median)"
# The bench reads (WARMUP + BATCHES) x 64 images, more than the 4,000 of an epoch: the next epoch's reads of the same
# images are ranges fetched again, as the folder reads its files again; the read-ahead also fetched the batches in
# flight when the bench stopped.
awk -v r="$ranged" -v w="$whole" -v n="$repeats" -v read=$(( (warmup + batches) * 64 )) -v c="$(grep -c range=bytes "$work/requests-read-ahead.log")" 'BEGIN {
  printf "  HTTP run with read-ahead: %d ranges (%.1f MB) fetched for %d images read, %d of them a range fetched before; start-up fetched %.3f MB (shards.json and indexes)\n", c, r / 1e6, read, n, w / 1e6 }'

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
