#!/usr/bin/env python3
# Import benchmark: dtc-compile's default pipeline (import + canonicalize + shape inference,
# `--emit ir`) against Python onnx's `load(load_external_data=False)` + `infer_shapes`, on the
# bundled models in models/ and a generated GPT-2-XL graph (tools/bench/gen_gpt2_xl.py).
# Each measurement runs alone in its own subprocess; peak RSS is that child's ru_maxrss (wait4).
#
#     python3 tools/bench/import_bench.py --dtc build/tools/dtc-compile [--models-dir models]
#         [--bench-dir /tmp/dtc-bench] [--repeat 3] [--no-gpt2] [--gpt2-qkv split|slice]
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Runs in the onnx child: prints the seconds spent in load + infer_shapes (interpreter start-up
# and `import onnx` excluded, they are reported separately as the baseline row).
ONNX_CHILD = r"""
import sys, time
import onnx
t0 = time.perf_counter()
m = onnx.load(sys.argv[1], load_external_data=False)
m = onnx.shape_inference.infer_shapes(m)
print(time.perf_counter() - t0, len(m.graph.node))
"""
BASELINE_CHILD = "import onnx; print(0.0, 0)"


TIMEOUT_S = 120  # per run: keeps the whole benchmark bounded even if a tool hangs


def run_child(cmd, stdout=subprocess.DEVNULL):
    """Runs `cmd`; returns (wall seconds, peak RSS in MiB, return code, stdout text, stderr).
    Output goes to temporary files (no pipe can fill up) and the child is reaped with wait4,
    which returns that child's own rusage; a timer kills it after TIMEOUT_S."""
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out_f if stdout == subprocess.PIPE else stdout,
                             stderr=err_f)
        timer = threading.Timer(TIMEOUT_S, p.kill)
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        timed_out = not timer.is_alive()
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read().decode(), err_f.read().decode()
    if timed_out and p.returncode != 0:
        err = f"timed out after {TIMEOUT_S} s\n" + err
    # Linux reports ru_maxrss in KiB.
    return wall, usage.ru_maxrss / 1024.0, p.returncode, out, err


def bench_dtc(dtc, model, repeat):
    walls, rss = [], 0.0
    for _ in range(repeat):
        # stdout to /dev/null instead of `-o /dev/null`: dtc-compile writes -o files through a
        # temporary + rename, which must never be pointed at a device node.
        wall, mib, rc, _, err = run_child([dtc, model, "--emit", "ir"])
        if rc != 0:
            return None, None, (err.strip().splitlines() or [f"exit {rc}"])[0]
        walls.append(wall)
        rss = max(rss, mib)
    return statistics.median(walls), rss, None


def bench_onnx(python, model, repeat):
    walls, rss, nodes = [], 0.0, 0
    for _ in range(repeat):
        code = BASELINE_CHILD if model is None else ONNX_CHILD
        args = [python, "-c", code] + ([] if model is None else [model])
        _, mib, rc, out, err = run_child(args, stdout=subprocess.PIPE)
        if rc != 0:
            return None, None, 0, (err.strip().splitlines() or [f"exit {rc}"])[-1]
        secs, n = out.split()
        walls.append(float(secs))
        nodes = int(n)
        rss = max(rss, mib)
    return statistics.median(walls), rss, nodes, None


def fmt(x, spec):
    width = int(spec.split(".")[0])
    return "-".rjust(width) if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description="dtc-compile vs onnx import + shape inference")
    ap.add_argument("--dtc", default=os.path.join(REPO, "build", "tools", "dtc-compile"))
    ap.add_argument("--models-dir", default=os.path.join(REPO, "models"))
    ap.add_argument("--bench-dir", default="/tmp/dtc-bench",
                    help="where the GPT-2-XL graph is generated (kept and reused)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter with the onnx package for the reference measurement")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (median time)")
    ap.add_argument("--no-gpt2", action="store_true", help="skip the GPT-2-XL graph")
    ap.add_argument("--gpt2-qkv", choices=["split", "slice"], default="split",
                    help="GPT-2-XL variant: QKV cut by one Split (as PyTorch exports) or Slices")
    args = ap.parse_args()
    if not os.access(args.dtc, os.X_OK):
        sys.exit(f"error: {args.dtc}: not an executable dtc-compile (pass --dtc)")

    models = sorted(os.path.join(args.models_dir, f) for f in os.listdir(args.models_dir)
                    if f.endswith(".onnx"))
    if not args.no_gpt2:
        name = "gpt2_xl" if args.gpt2_qkv == "split" else "gpt2_xl_slice"
        gpt2 = os.path.join(args.bench_dir, name + ".onnx")
        if not os.path.exists(gpt2) or not os.path.exists(
                os.path.join(args.bench_dir, name + ".weights")):
            subprocess.run([args.python, os.path.join(HERE, "gen_gpt2_xl.py"), args.bench_dir,
                            "--name", name, "--qkv-split", args.gpt2_qkv], check=True)
        models.append(gpt2)

    start = time.perf_counter()
    base_s, base_rss, _, base_err = bench_onnx(args.python, None, 1)
    if base_err:
        sys.exit(f"error: {args.python} cannot import onnx: {base_err}")
    header = (f"{'model':<18} {'nodes':>6} {'dtc s':>8} {'dtc MiB':>8} {'onnx s':>8} "
              f"{'onnx MiB':>9} {'t onnx/dtc':>10} {'mem onnx/dtc':>12}")
    print(header)
    print("-" * len(header))
    failures = []
    for model in models:
        name = os.path.splitext(os.path.basename(model))[0]
        d_s, d_rss, d_err = bench_dtc(args.dtc, model, args.repeat)
        o_s, o_rss, nodes, o_err = bench_onnx(args.python, model, args.repeat)
        for who, err in (("dtc", d_err), ("onnx", o_err)):
            if err:
                failures.append(f"{name}: {who}: {err}")
        t_ratio = o_s / d_s if d_s and o_s else None
        m_ratio = o_rss / d_rss if d_rss and o_rss else None
        print(f"{name:<18} {nodes:>6} {fmt(d_s, '8.3f')} {fmt(d_rss, '8.1f')} "
              f"{fmt(o_s, '8.3f')} {fmt(o_rss, '9.1f')} {fmt(t_ratio, '10.2f')} "
              f"{fmt(m_ratio, '12.2f')}", flush=True)
    print(f"\ndtc s: median wall time of the whole dtc-compile process ({args.repeat} runs); "
          f"onnx s: load + infer_shapes inside the Python child (start-up excluded).")
    print(f"onnx MiB includes the interpreter with onnx imported: {base_rss:.1f} MiB alone.")
    print(f"total benchmark time {time.perf_counter() - start:.1f} s")
    for f in failures:
        print("FAILED " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
