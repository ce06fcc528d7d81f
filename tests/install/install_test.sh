#!/usr/bin/env bash
# `cmake --install` of the build at BUILD_DIR into a fresh prefix, which is then moved elsewhere (the
# installed tree must not depend on where it was installed), and consumer_test.sh against the moved
# tree.
#   install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 source=$2 work=$3
here=$(dirname "$(realpath "$0")")
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/installed" > "$work/install.log"
echo "installed $(find "$work/installed" -type f | wc -l) files; moving the tree"
mv "$work/installed" "$work/moved"
"$here/consumer_test.sh" "$work/moved" "$source" "$work/consumer"
