#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds dtc-compile and dtc-run,
# compiles the bundled default model (models/cnn.onnx, a small CNN) into a forward-only plan
# at the batch size of the bundled inputs (models/data/cnn_input.npz), runs it with a kernel
# profile and prints the predicted class of every input. Later milestones grow this into
# distributed training.
# Usage: tools/run.sh [MODEL.onnx INPUTS.npz]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
model="${1:-models/cnn.onnx}"
inputs="${2:-models/data/cnn_input.npz}"
tools/setup.sh
echo "run.sh: building dtc-compile and dtc-run in build/ (the first build takes several minutes)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build dtc-compile dtc-run >/dev/null
echo "run.sh: compiling $model and running it on $inputs"
PY="${PYTHON:-python3}"
batch=$("$PY" -c "import numpy as np, sys; a = np.load(sys.argv[1]); print(a[a.files[0]].shape[0])" "$inputs")
mkdir -p build/main-job
build/tools/dtc-compile "$model" --inference --batch-size "$batch" -o build/main-job/plan.dtc
build/tools/dtc-run build/main-job/plan.dtc --infer --inputs "$inputs" \
  --outputs build/main-job/outputs.npz --profile --warmup 1 --repeat 5
"$PY" - build/main-job/outputs.npz <<'PYEOF'
import sys
import numpy as np
out = np.load(sys.argv[1])
for name in out.files:
    a = out[name]
    print(f"output {name}: {a.dtype}{list(a.shape)}")
    if a.ndim == 2:
        print("  predicted class per input:", " ".join(str(int(c)) for c in a.argmax(axis=1)))
PYEOF
