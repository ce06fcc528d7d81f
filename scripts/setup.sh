#!/usr/bin/env bash
# Installs the Debian packages mirra's build, tests and demo need, when any are missing.
# Idempotent: when everything is present it only checks (no apt-get update, no network).
# Uses sudo when not run as root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config clang libclang-rt-14-dev
  libtbb-dev libflatbuffers-dev flatbuffers-compiler doctest-dev
  libdnnl-dev libopenblas-dev libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev zlib1g-dev libminizip-dev libcsv-dev libprotobuf-dev protobuf-compiler libisal-dev libpng-dev libturbojpeg0-dev dataset-fashion-mnist python3-flatbuffers iproute2 dpkg-dev debootstrap
  python3-pip python3-numpy patchelf
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
