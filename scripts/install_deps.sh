#!/usr/bin/env bash
# Installs hedgedb's build and run dependencies from Debian 12 packages.
# Skips apt entirely when everything is already installed. Extra packages
# (for example the fuzzing toolchain, scripts/fuzz.sh) can be named as arguments.
set -euo pipefail

PACKAGES=(
  build-essential cmake ccache pkg-config
  libfaiss-dev libopenblas-dev librocksdb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev zlib1g-dev
  libtorch-dev
  libopencv-imgcodecs-dev libopencv-imgproc-dev libmatio-dev libcairo2-dev
  dataset-fashion-mnist
  python3-pytest python3-torch python3-dev python3-numpy pybind11-dev python3-distributed
  python3-pip python3-setuptools
)
PACKAGES+=("$@")

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) != 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
