#!/usr/bin/env bash
# Packs what a trainer build on the GPU machine needs besides LibTorch into OUT_DIR/gpu-kit.tar.gz (default
# build/gpu-kit), well under the device tool's 64 MiB. That machine has CUDA, python3's torch (whose CMake files
# a C++ build uses), cmake, ninja and a compiler, but not CLI11, spdlog/fmt, nlohmann-json, GoogleTest or
# OpenCV's C++ libraries, and it cannot download anything.
#   - Debian 12's CLI11, spdlog + fmt, nlohmann-json, GoogleTest and Gloo's headers, files and CMake packages as installed
#     (their CMake files find the rest relative to themselves, so the tree works wherever it is unpacked);
#   - a minimal static OpenCV 4.6 (core, imgproc, imgcodecs with JPEG and PNG only), built from Debian's source
#     package, with Debian's static libjpeg, libpng and zlib, and a small relocatable OpenCVConfig.cmake;
#   - libjpeg-turbo's headers beside its static library (the trainer's own crop decode calls it), so that the build
#     there never takes the device image's jpeg headers, or finds none;
#   - kit/FORMAT, the kit's format number: check.sh refuses an older kit at once, before a build that would fail.
# libcurl and ONNX stay out: check.sh builds without them (no downloads, no ONNX export on the GPU machine).
# Runs here (Debian 12, after scripts/setup.sh); downloads only Debian's opencv source package. The OpenCV build
# takes about ten minutes on 2 cores and is cached in OUT_DIR/opencv-install.
#   scripts/gpu/make_kit.sh [OUT_DIR]
# Then, with the device tool: carry OUT_DIR/gpu-kit.tar.gz and run scripts/gpu/check.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mkdir -p "${1:-build/gpu-kit}" && cd "${1:-build/gpu-kit}" && pwd)
log() { echo "make_kit: $*" >&2; }
start=$(date +%s)

packages=(libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 nlohmann-json3-dev libgtest-dev libgloo-dev
          libjpeg62-turbo-dev libpng-dev zlib1g-dev)
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || {
    log "package $p is missing: run scripts/setup.sh (or apt-get install $p)"; exit 1; }
done

# ---- minimal static OpenCV from Debian's source package ----
opencv=$out/opencv-install
if [[ ! -f $opencv/.done ]]; then
  src=$out/opencv-src
  rm -rf "$src" && mkdir -p "$src/lists/partial"
  echo "deb-src $(scripts/apt_mirror.sh) bookworm main" >"$src/sources.list"
  apt_src=(-o "Dir::Etc::SourceList=$src/sources.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$src/lists")
  log "fetching Debian's opencv source package"
  (cd "$src" && apt-get "${apt_src[@]}" update -qq && apt-get "${apt_src[@]}" source --download-only opencv >/dev/null 2>&1)
  tar -xJf "$src"/opencv_*.orig.tar.xz -C "$src"
  lib=/usr/lib/x86_64-linux-gnu
  log "building OpenCV (core, imgproc, imgcodecs: JPEG and PNG) as static libraries"
  cmake -S "$src"/opencv-*/ -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$opencv" \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_LIST=core,imgproc,imgcodecs \
    -DWITH_JPEG=ON -DJPEG_INCLUDE_DIR=/usr/include -DJPEG_LIBRARY=$lib/libjpeg.a \
    -DWITH_PNG=ON -DPNG_PNG_INCLUDE_DIR=/usr/include -DPNG_LIBRARY=$lib/libpng16.a \
    -DZLIB_INCLUDE_DIR=/usr/include -DZLIB_LIBRARY=$lib/libz.a \
    -DWITH_TIFF=OFF -DWITH_WEBP=OFF -DWITH_OPENJPEG=OFF -DWITH_JASPER=OFF -DWITH_OPENEXR=OFF -DWITH_GDAL=OFF \
    -DWITH_GDCM=OFF -DWITH_IMGCODEC_HDR=OFF -DWITH_IMGCODEC_SUNRASTER=OFF -DWITH_IMGCODEC_PXM=OFF \
    -DWITH_IMGCODEC_PFM=OFF -DWITH_IPP=OFF -DWITH_ITT=OFF -DWITH_OPENCL=OFF -DWITH_CUDA=OFF -DWITH_EIGEN=OFF \
    -DWITH_LAPACK=OFF -DWITH_PROTOBUF=OFF -DWITH_QUIRC=OFF -DWITH_ADE=OFF -DWITH_VA=OFF -DWITH_GTK=OFF \
    -DWITH_QT=OFF -DWITH_FFMPEG=OFF -DWITH_GSTREAMER=OFF -DWITH_V4L=OFF -DWITH_1394=OFF -DWITH_OPENMP=OFF \
    -DWITH_TBB=OFF -DWITH_PTHREADS_PF=ON -DWITH_VTK=OFF -DBUILD_TESTS=OFF -DBUILD_PERF_TESTS=OFF \
    -DBUILD_EXAMPLES=OFF -DBUILD_opencv_apps=OFF -DBUILD_JAVA=OFF -DBUILD_opencv_python3=OFF \
    -DOPENCV_GENERATE_PKGCONFIG=OFF -DCV_TRACE=OFF >"$out/opencv-cmake.log" 2>&1 \
    || { tail -30 "$out/opencv-cmake.log"; exit 1; }
  cmake --build "$src/build" >"$out/opencv-build.log" 2>&1 || { tail -30 "$out/opencv-build.log"; exit 1; }
  cmake --install "$src/build" >/dev/null
  touch "$opencv/.done"
  rm -rf "$src"
fi

# ---- the kit tree: usr/ as on Debian, so the packages' CMake files resolve their own paths ----
stage=$out/stage
rm -rf "$stage" && mkdir -p "$stage/kit"
for p in libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 nlohmann-json3-dev libgtest-dev libgloo-dev; do
  dpkg -L "$p" | while read -r f; do [[ -f $f || -L $f ]] && echo "$f"; done
done | grep -v -e '^/usr/share/doc' -e '^/usr/share/lintian' -e '^/usr/src' -e '/pkgconfig/' | sort -u \
  | tar -cf - -T - 2>/dev/null | tar -xf - -C "$stage/kit"
mkdir -p "$stage/kit/usr/opencv/lib" "$stage/kit/usr/opencv/include" "$stage/kit/usr/lib/cmake/opencv4"
cp -r "$opencv/include/opencv4" "$stage/kit/usr/opencv/include/"
cp "$opencv"/lib/libopencv_{imgcodecs,imgproc,core}.a "$stage/kit/usr/opencv/lib/"
cp /usr/lib/x86_64-linux-gnu/{libjpeg.a,libpng16.a,libz.a} "$stage/kit/usr/opencv/lib/"
cp /usr/include/{zlib.h,zconf.h,jpeglib.h,jerror.h,jmorecfg.h} /usr/include/x86_64-linux-gnu/jconfig.h \
  "$stage/kit/usr/opencv/include/"
# The kit's format: 2 adds the jpeg headers. check.sh requires at least this number.
echo "2 jpeg-headers" >"$stage/kit/FORMAT"
cat >"$stage/kit/usr/lib/cmake/opencv4/OpenCVConfig.cmake" <<'CONFIG'
# The kit's static OpenCV (core, imgproc, imgcodecs with JPEG and PNG): paths relative to this file.
get_filename_component(_kit_opencv "${CMAKE_CURRENT_LIST_DIR}/../../../opencv" ABSOLUTE)
set(OpenCV_VERSION 4.6.0)
set(OpenCV_INCLUDE_DIRS "${_kit_opencv}/include/opencv4")
set(OpenCV_LIBS "${_kit_opencv}/lib/libopencv_imgcodecs.a" "${_kit_opencv}/lib/libopencv_imgproc.a"
                "${_kit_opencv}/lib/libopencv_core.a" "${_kit_opencv}/lib/libjpeg.a" "${_kit_opencv}/lib/libpng16.a"
                "${_kit_opencv}/lib/libz.a" ${CMAKE_DL_LIBS} pthread)
set(OpenCV_FOUND TRUE)
CONFIG
cat >"$stage/kit/README" <<'README'
trainer's GPU build kit (scripts/gpu/make_kit.sh). Build with:
  cmake -S REPO -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="KIT/usr;$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    -DZLIB_ROOT=KIT/usr/opencv -DJPEG_INCLUDE_DIR=KIT/usr/opencv/include \
    -DJPEG_LIBRARY=KIT/usr/opencv/lib/libjpeg.a -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_ONNX=ON
scripts/gpu/check.sh does this and the rest.
README
tar -czf "$out/gpu-kit.tar.gz" -C "$stage" kit
rm -rf "$stage"
size=$(du -m "$out/gpu-kit.tar.gz" | cut -f1)
log "$out/gpu-kit.tar.gz: ${size} MiB, made in $(( $(date +%s) - start ))s"
(( size < 40 )) || { log "the kit is over 40 MiB"; exit 1; }
