# Shared by the lanes: a cached Debian root per lane, packages installed in it, and commands run in it with
# the repository bind-mounted at /src. Source it; it needs root (debootstrap, mount, chroot).
#   TRAINER_LANE_CACHE  where the roots live (default /var/cache/trainer-lanes); delete a root to rebuild it
#   TRAINER_MIRROR      the Debian mirror (default: the one this machine's apt uses, scripts/apt_mirror.sh)

lane_cache=${TRAINER_LANE_CACHE:-/var/cache/trainer-lanes}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
lane_mirror=$("$repo/scripts/apt_mirror.sh")

lane_log() { echo "$(basename "$0"): $*" >&2; }

# lane_root NAME SUITE COMPONENTS: creates (once) a minbase root for SUITE with the given components.
lane_root() {
  local name=$1 suite=$2 components=$3
  local root=$lane_cache/$name
  if [[ ! -f $root/.lane-ready ]]; then
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >&2
    lane_log "creating the $suite root at $root"
    rm -rf "$root" && mkdir -p "$root"
    debootstrap --variant=minbase --components="${components// /,}" "$suite" "$root" "$lane_mirror" >"$root.log" 2>&1 \
      || { tail -20 "$root.log"; return 1; }
    printf 'deb %s %s %s\n' "$lane_mirror" "$suite" "$components" >"$root/etc/apt/sources.list"
    printf 'deb-src %s %s %s\n' "$lane_mirror" "$suite" "$components" >>"$root/etc/apt/sources.list"
    touch "$root/.lane-ready"
  fi
  echo "$root"
}

# lane_mounts ROOT: /proc, /dev and the repository at /src; undone by lane_unmount (set as an EXIT trap).
lane_mounts() {
  local root=$1
  mkdir -p "$root/src"
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
  mountpoint -q "$root/src" || mount --bind "$repo" "$root/src"
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}
lane_unmount() {
  local root=$1
  for m in src dev proc; do mountpoint -q "$root/$m" && umount -l "$root/$m"; done
  return 0
}

# lane_run ROOT COMMAND...: runs a shell command in the root, in /src, as root, with a clean environment.
lane_run() {
  local root=$1; shift
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/bash -c "cd /src && $*"
}

# lane_install ROOT PACKAGE...: installs what is missing (apt-get update only when something is).
lane_install() {
  local root=$1; shift
  local missing=()
  for p in "$@"; do
    lane_run "$root" "dpkg-query -W -f='\${Status}' $p 2>/dev/null | grep -q 'install ok installed'" || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  lane_log "installing ${missing[*]}"
  lane_run "$root" "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${missing[*]}" \
    >"$root.apt.log" 2>&1 || { tail -30 "$root.apt.log"; return 1; }
}
