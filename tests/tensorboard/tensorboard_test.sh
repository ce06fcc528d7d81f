#!/usr/bin/env bash
# `mirra train --logdir` read back by TensorBoard itself: makes a virtual environment with PyPI's
# tensorboard (once per build folder, over Debian's Python with its numpy and flatbuffers), then runs
# read_event_files.py, which trains with the runner and checks what TensorBoard's EventAccumulator finds.
#
#   tensorboard_test.sh PYTHON MIRRA MODELS_DIR WORK_DIR PYTHON_SCHEMA_DIR
set -euo pipefail
python=$1 mirra=$2 models=$3 work=$4 schema=$5
tensorboard_version=2.20.0
venv="$work/venv"
mkdir -p "$work"
if ! "$venv/bin/python" -c "import flatbuffers, numpy, tensorboard, sys; sys.exit(tensorboard.__version__ != '$tensorboard_version')" 2>/dev/null; then
  rm -rf "$venv"
  "$python" -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "tensorboard==$tensorboard_version"
fi
exec "$venv/bin/python" "$(dirname "$0")/read_event_files.py" "$mirra" "$models" "$work" "$schema"
