#!/usr/bin/env bash
# The GPU check's dry run here, on the CPU: the same check.sh and the same kit as on the GPU machine, each call
# (part) in turn, in a mount namespace whose /usr/include has libjpeg's headers hidden (an overlay with whiteouts),
# so that a build that still takes the system's jpeg headers instead of the kit's fails here, as it would on a
# device image without them. Makes the kit first when it is missing (scripts/gpu/make_kit.sh). Prints each call's
# time here and the limits it would run under on the GPU machine (at most 570 s: one device command of 9.5 min).
# Needs root (unshare, mount). Python: /usr/bin/python3 (Debian's python3-torch), unless TRAINER_CHECK_PYTHON.
#   scripts/gpu/dry_run.sh [PART...]      default: parts 1 2 3 4; results in build/gpu-dry-run/
set -uo pipefail
cd "$(dirname "$0")/../.."
parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(1 2 3 4)
kit=build/gpu-kit/gpu-kit.tar.gz
[[ -f $kit ]] || scripts/gpu/make_kit.sh || exit 1
out=$(mkdir -p build/gpu-dry-run && cd build/gpu-dry-run && pwd)

hide=$(mktemp -d)
trap 'rm -rf "$hide"' EXIT
mkdir -p "$hide/upper/x86_64-linux-gnu" "$hide/work"
for h in jpeglib.h jerror.h jmorecfg.h jpegint.h; do mknod "$hide/upper/$h" c 0 0; done
mknod "$hide/upper/x86_64-linux-gnu/jconfig.h" c 0 0

status=0
for part in "${parts[@]}"; do
  begin=$(date +%s)
  # A fresh build folder per dry run, so that the kit's paths configure from nothing (TRAINER_DRY_RUN_KEEP_BUILD=1
  # keeps the last one, as a warm GPU machine would between calls).
  [[ $part == "${parts[0]}" && ${TRAINER_DRY_RUN_KEEP_BUILD:-0} != 1 ]] && rm -rf build/gpu/build
  unshare -m bash -c '
    mount -t overlay overlay -o "lowerdir=/usr/include,upperdir=$1/upper,workdir=$1/work" /usr/include || exit 1
    [[ ! -e /usr/include/jpeglib.h && ! -e /usr/include/x86_64-linux-gnu/jconfig.h ]] || { echo "dry_run: jpeg headers still visible" >&2; exit 1; }
    TRAINER_CHECK_CPU=1 TRAINER_CHECK_SCALE=${TRAINER_CHECK_SCALE:-6} TRAINER_CHECK_PYTHON=${TRAINER_CHECK_PYTHON:-/usr/bin/python3} \
      exec scripts/gpu/check.sh --part "$2" "$3" "$4"' _ "$hide" "$part" "$kit" "$out"
  rc=$?
  limits=$(grep -o 'limits that add to [0-9]*s' "$out/check.log" | tail -1)
  echo "dry_run: part $part: exit $rc in $(( $(date +%s) - begin ))s here; ${limits:-no limits line}"
  [[ $rc == 0 ]] || status=1
done
exit $status
