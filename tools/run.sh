#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds dtc-compile, and compiles
# the bundled default model (a small CNN with BatchNorm, exported by PyTorch in training mode),
# printing its summary. Later milestones grow this into distributed training.
# Usage: tools/run.sh [MODEL.onnx]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
model="${1:-models/cnn_train.onnx}"
tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build dtc-compile >/dev/null
build/tools/dtc-compile "$model" --emit summary
