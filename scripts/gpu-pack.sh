#!/bin/sh
# SPDX-License-Identifier: MIT
# Packs what a GPU machine without build tools needs to run the gpu suite
# and the GPU figures (scripts/gpu-run.sh) into DEST/.device: a copy of the
# source tree and of the build directory (objects left out), the shared
# libraries the binaries need beyond glibc and CUDA, and this Meson (the
# build directory only opens with the Meson that made it). On the GPU
# machine, from DEST: sh .device/run.sh (writes figures under $OUT).
# Usage: scripts/gpu-pack.sh BUILD_DIR DEST
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
dev="$2/.device"
rm -rf "$dev"
mkdir -p "$dev/wt" "$dev/lib" "$dev/meson"
# The build directory records absolute paths: the run script links
# $src to $dev/wt on the GPU machine, so keep the same layout.
case "$build" in "$src"/*) ;; *) echo "build dir must be inside $src" >&2; exit 1 ;; esac
(cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$dev/wt")
(cd "$src" && find "${build#$src/}" -name '*.p' -prune -o \( -type f -o -type l \) -print0 | xargs -0 cp -P --parents -t "$dev/wt")
for bin in $(find "$build" -name '*.p' -prune -o -type f -perm -u+x -print) $(find "$build" -name '*.so*' -type f); do
	ldd "$bin" 2>/dev/null | awk '/=> \// { print $3 }'
done | sort -u | grep -v "^$build/" | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so|/libnvrtc|/libnvJitLink|/libcuda|/cuda' |
	xargs -r cp -L -t "$dev/lib"
meson=$(command -v meson)
cp "$meson" "$dev/meson/meson.py"
py=$(sed -n '1s/^#! *//p' "$meson")
cp -r "$($py -c 'import mesonbuild, os; print(os.path.dirname(mesonbuild.__file__))')" "$dev/meson/"
printf '%s\n' "$src" > "$dev/srcdir"
cp "$src/scripts/gpu-run.sh" "$dev/run.sh"
du -sh "$dev"
