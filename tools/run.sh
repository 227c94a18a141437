#!/usr/bin/env bash
# The README's main-job command: installs what is missing, builds dtc-compile and dtc-run, and
# trains the bundled default model (models/mlp_digits.onnx, a 64-32-10 MLP) on the bundled
# dataset (the UCI handwritten digits shipped with scikit-learn, models/data/digits_*.npz) with
# synchronous data parallelism over two local processes: it compiles a dp=2 training plan
# (softmax cross-entropy, Adam, global batch 32 = 2 ranks x 16), trains (10 epochs by default) with
# `dtc-run --nproc 2` (mpirun underneath) printing loss, accuracy and throughput, exports the
# trained model as ONNX and checks the export with onnxruntime on the validation set (its
# accuracy counts all 360 samples; dtc-run's validation drops the last partial global batch).
# Usage: tools/run.sh [EPOCHS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
epochs="${1:-10}"
tools/setup.sh
echo "run.sh: building dtc-compile and dtc-run in build/ (the first build takes several minutes)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# One line in 25 of ninja's progress, and every line that is not progress (errors).
ninja -C build dtc-compile dtc-run | awk '!/^\[/ || NR % 25 == 1 { print; fflush() }'
out=build/main-job
mkdir -p "$out"
echo "run.sh: compiling models/mlp_digits.onnx into a data-parallel training plan for 2 ranks"
build/tools/dtc-compile models/mlp_digits.onnx -o "$out/train.dtc" --strategy dp=2 \
  --loss softmax-cross-entropy --optimizer adam --lr 0.01 --batch-size 32
echo "run.sh: training for $epochs epochs on models/data/digits_train.npz with 2 processes"
build/tools/dtc-run "$out/train.dtc" --nproc 2 --data models/data/digits_train.npz \
  --val-data models/data/digits_val.npz --epochs "$epochs" --seed 0 \
  --log "$out/metrics.jsonl" --export "$out/trained.onnx"
PY=.venv/bin/python3  # made by tools/setup.sh
"$PY" - "$out/trained.onnx" models/data/digits_val.npz <<'PYEOF'
import sys
import numpy as np
import onnxruntime as ort
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
data = np.load(sys.argv[2])
logits = sess.run(None, {"input": data["input"]})[0]
acc = float((logits.argmax(axis=1) == data["label"]).mean())
print(f"run.sh: the exported model {sys.argv[1]} in onnxruntime: validation accuracy {acc:.4f} "
      f"on {len(data['label'])} digits")
PYEOF
