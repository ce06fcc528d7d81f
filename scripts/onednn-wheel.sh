#!/usr/bin/env bash
# Unpacks a newer oneDNN than Debian 12's (2.6) into PREFIX, for a build with
# -DMIRRA_ONEDNN_ROOT=PREFIX: Intel's oneDNN 3.2 built on oneTBB, from the PyPI wheels onednn-cpu-tbb
# and onednn-devel-cpu-tbb, with the two Intel compiler runtime libraries it links (intel-cmplr-lib-rt).
# The wheels are pinned by hash; the library finds its runtime beside itself and the system's oneTBB,
# the one mirra's executor runs on. Does nothing when PREFIX already has it (a stamp written last, so
# an interrupted run is redone).
# Usage: scripts/onednn-wheel.sh PREFIX
set -euo pipefail
prefix=${1:?usage: scripts/onednn-wheel.sh PREFIX}
version=3.2
stamp="$prefix/.onednn-wheel-$version"
if [ -e "$stamp" ]; then
  echo "onednn-wheel: oneDNN $version already in $prefix"
  exit 0
fi

download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
cat > "$download/requirements.txt" <<'REQUIREMENTS'
onednn-cpu-tbb==2023.2.0 --hash=sha256:3265b317e9d74ee42f3b7fe4ba0e6d8347a400f0e9c1531fa80b0bfa18d76b13
onednn-devel-cpu-tbb==2023.2.0 --hash=sha256:d76b9ddf0ac717b5c5caa89e9922ec752d175e6f0492503f3baa8499607bec82
intel-cmplr-lib-rt==2023.2.0 --hash=sha256:f2291fbd870639dfff0e6eb583fbb5668138f000139716c2e692b90ba5ae5c7c
REQUIREMENTS
python3 -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -r "$download/requirements.txt" \
  -d "$download"

# Wheels hold a file's data under NAME.data/data/; their symbolic links arrive as copies, so only the
# versioned library is written and the links are made here.
mkdir -p "$prefix/lib" "$prefix/include"
python3 - "$download" "$prefix" "$version" <<'UNPACK'
import pathlib, sys, zipfile
download, prefix, version = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
wanted_libraries = {f"libdnnl.so.{version}", "libimf.so", "libintlc.so.5"}
for wheel in download.glob("*.whl"):
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            parts = name.split("/")
            if len(parts) < 4 or not parts[0].endswith(".data") or parts[1] != "data" or name.endswith("/"):
                continue
            relative = pathlib.Path(*parts[2:])
            if relative.parts[0] != "include" and not (relative.parts[0] == "lib" and relative.name in wanted_libraries):
                continue
            target = prefix / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(name))
            if relative.parts[0] == "lib":
                target.chmod(0o755)
UNPACK
ln -sf "libdnnl.so.$version" "$prefix/lib/libdnnl.so.3"
ln -sf "libdnnl.so.$version" "$prefix/lib/libdnnl.so"
patchelf --set-rpath '$ORIGIN' "$prefix/lib/libdnnl.so.$version"
touch "$stamp"
echo "onednn-wheel: oneDNN $version in $prefix"
