#!/usr/bin/env bash
# Prints the Debian mirror this machine's apt already uses (the first archive, not the security one), so the
# scripts that fetch from Debian (the lanes' roots, the GPU kit's source package) name no host of their own.
#   mirror=$(scripts/apt_mirror.sh)      TRAINER_MIRROR overrides it
set -euo pipefail
if [[ -n ${TRAINER_MIRROR:-} ]]; then echo "$TRAINER_MIRROR"; exit 0; fi
shopt -s nullglob
# deb822 files (URIs: one or more addresses) first, then one-line sources ("deb [options] URI suite ...").
for f in /etc/apt/sources.list.d/*.sources; do
  awk 'tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }' "$f"
done | grep -v -- '-security' | head -1 | grep . && exit 0
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [[ -f $f ]] && awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; break } }' "$f"
done | grep -v -- '-security' | head -1 | grep . && exit 0
echo "apt_mirror: no Debian archive in /etc/apt/sources.list or /etc/apt/sources.list.d/ (set TRAINER_MIRROR)" >&2
exit 1
