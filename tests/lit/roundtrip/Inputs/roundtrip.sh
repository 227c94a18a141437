#!/bin/sh
# Round trip of one model: compile -> IR text; export -> ONNX checker; re-import the export ->
# IR text identical to the first (the opset line may rise to the canonical forms' opset).
# Usage: roundtrip.sh DTC_COMPILE PYTHON MODEL TMPDIR
set -e
dtc="$1"; py="$2"; model="$3"; tmp="$4"
mkdir -p "$tmp"
"$dtc" "$model" -o "$tmp/a.ir"
"$dtc" "$model" --emit onnx -o "$tmp/out.onnx"
"$py" "$(dirname "$0")/check_model.py" "$tmp/out.onnx"
"$dtc" "$tmp/out.onnx" -o "$tmp/b.ir"
sed 1d "$tmp/a.ir" > "$tmp/a.body"
sed 1d "$tmp/b.ir" > "$tmp/b.body"
diff "$tmp/a.body" "$tmp/b.body"
echo "roundtrip ok: $model"
