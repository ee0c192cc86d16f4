#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what jitcache needs to build and test (Debian packages), then
# configures and builds it in ./build. Idempotent: installs only what is
# missing and rebuilds only what changed. The CUDA toolkit (NVRTC, nvJitLink)
# is expected under $CUDA_PATH or /usr/local/cuda.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential meson ninja-build pkg-config libuv1-dev libsqlite3-dev libxxhash-dev libzstd-dev
          libcmocka-dev libinih-dev libsystemd-dev systemd clang clang-format libclang-rt-14-dev file python3-pytest python3-mypy
          libhiredis-dev libsodium-dev redis-server strace scdoc man-db python3-venv python3-setuptools)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "setup: installing ${missing[*]}"
	sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda=${CUDA_PATH:-/usr/local/cuda}
if [ ! -e "$cuda/include/nvrtc.h" ] || [ ! -e "$cuda/include/nvJitLink.h" ]; then
	echo "setup: no CUDA toolkit with NVRTC and nvJitLink at $cuda (set CUDA_PATH)" >&2
	exit 1
fi
export CUDA_PATH=$cuda

if [ ! -f build/build.ninja ]; then
	meson setup build "$@" >/dev/null
elif [ $# -gt 0 ]; then
	meson configure build "$@" >/dev/null
fi
ninja -C build >/dev/null
echo "setup: built in $(pwd)/build"
