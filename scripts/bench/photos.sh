# Sourced by the data benchmarks: scikit-image's sample photographs, the benchmarks' source images.
#   photos=$(sample_photos build/bench-data)
# Debian's python3-skimage when installed, else its package downloaded and unpacked (not installed) under WORK.
sample_photos() {
  local work=$1 photos=/usr/lib/python3/dist-packages/skimage/data
  if [[ ! -f $photos/astronaut.png ]]; then
    photos=$work/skimage/usr/lib/python3/dist-packages/skimage/data
    if [[ ! -f $photos/astronaut.png ]]; then
      (cd "$work" && apt-get download python3-skimage >/dev/null 2>&1) ||
        { echo "cannot download python3-skimage (its sample photographs are the benchmark's images)" >&2; return 1; }
      dpkg-deb -x "$work"/python3-skimage_*.deb "$work/skimage"
    fi
  fi
  echo "$photos"
}
