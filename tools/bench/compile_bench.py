#!/usr/bin/env python3
# Compile benchmark (issue 18): dtc-compile's training compile of the generated GPT-2-XL shape
# (tools/bench/gen_gpt2_xl.py: sparse external weights) and of fewer-layer variants, for several
# strategies; prints per case the wall time, the compiler's peak RSS and the plan's size beside
# the targets (under 2 s, under 1 GiB, plan under 10 MB), then how each figure grows with the
# number of layers (it should be linear), with the world size (it should be flat) and with the
# number of micro-batches of a pipeline (pp=8 at its default 8 against pp=8,microbatches=32: it
# should be nearly flat). For every plan it also times a rank's start: `dtc-run PLAN --validate
# --rank R` reads and validates the plan as rank R does before it runs (its own program in full,
# the others without instructions) and reports the time and its peak RSS above what it held
# before (the process and its libraries), for the rank with the largest program.
# Each compile runs alone in its own subprocess; peak RSS is that child's ru_maxrss (wait4).
# Run by hand (not in CI: the 48-layer cases take minutes on 2 cores):
#
#     python3 tools/bench/compile_bench.py [--dtc build/tools/dtc-compile] [--bench-dir DIR]
#         [--dtc-run build/tools/dtc-run] [--layers 12,24,48]
#         [--strategies "single;dp=8;dp=1024;pp=8;dp=8,pp=4"] [--replica-batch 8] [--repeat 1]
#         [--big]
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# The targets.
TARGET_WALL_S = 2.0
TARGET_RSS_MIB = 1024.0
TARGET_PLAN_MB = 10.0
DEFAULT_STRATEGIES = ["single", "dp=8", "dp=1024", "pp=8", "pp=8,microbatches=32", "dp=8,pp=4",
                      "dp=8,pp=4,tp=8"]


def run_child(cmd, timeout_s):
    """Runs `cmd`; returns (wall seconds, peak RSS in MiB, return code, stderr text). Output
    goes to temporary files (no pipe can fill up) and the child is reaped with wait4, which
    returns that child's own rusage; a timer kills it after `timeout_s`."""
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out_f, stderr=err_f)
        timer = threading.Timer(timeout_s, p.kill)
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        timed_out = not timer.is_alive()
        timer.cancel()
        rc = os.waitstatus_to_exitcode(status)
        err_f.seek(0)
        err = err_f.read().decode(errors="replace")
    if timed_out and rc != 0:
        err = f"timed out after {timeout_s} s\n" + err
    return wall, usage.ru_maxrss / 1024.0, rc, err  # Linux: ru_maxrss in KiB


def micro_batches(strategy):
    """The microbatches= of a --strategy text, or None when it sets none."""
    for part in strategy.split(","):
        key, _, value = part.partition("=")
        if key == "microbatches":
            return int(value)
    return None


def mesh_degrees(strategy):
    """(dp, pp, tp) of a --strategy text such as "dp=8,pp=4,tp=8" (single: (1, 1, 1))."""
    deg = {"dp": 1, "pp": 1, "tp": 1}
    for part in strategy.split(","):
        key, _, value = part.partition("=")
        if key in deg:
            deg[key] = int(value)
    return deg["dp"], deg["pp"], deg["tp"]


# The 6.6 B-parameter shape of issue 18: 48 layers, d_model 3328 (32 heads of 104), 2048 tokens.
BIG_SHAPE = {"name": "gpt2_6b6", "layers": 48, "d_model": 3328, "heads": 32, "context": 2048}


def ensure_model(python, bench_dir, layers, shape=None):
    name = shape["name"] if shape else ("gpt2_xl" if layers == 48 else f"gpt2_{layers}l")
    model = os.path.join(bench_dir, name + ".onnx")
    if not (os.path.exists(model) and os.path.exists(os.path.join(bench_dir, name + ".weights"))):
        extra = [] if not shape else ["--d-model", str(shape["d_model"]), "--heads",
                                      str(shape["heads"]), "--context", str(shape["context"])]
        subprocess.run([python, os.path.join(HERE, "gen_gpt2_xl.py"), bench_dir, "--name", name,
                        "--layers", str(layers)] + extra, check=True)
    return model


def warm_page_cache(model):
    """Reads the model and its weights once, untimed: the first compile after generating a
    model would otherwise also pay for filling the page cache with its gigabytes."""
    base = os.path.splitext(model)[0]
    for path in (model, base + ".weights"):
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass


def first_error(err, rc):
    lines = [l for l in err.strip().splitlines() if l.startswith("error")] or \
        err.strip().splitlines() or [f"exit {rc}"]
    return lines[0]


def largest_program_rank(err):
    """The rank of the stage with the most instructions, from dtc-compile's per-stage lines
    ("...: stage 3, rank 3: 2760 instructions ..." or "stage 1, each of 64 ranks: ..."), else 0.
    With "each of N ranks" the stage's first rank is not printed: rank 0 is taken then."""
    best, rank = -1, 0
    for line in err.splitlines():
        m = re.search(r"stage \d+, rank (\d+): (\d+) instructions", line)
        if m and int(m.group(2)) > best:
            best, rank = int(m.group(2)), int(m.group(1))
    return rank


def bench_start(dtc_run, plan, rank, repeat, timeout_s):
    """A rank's start: `dtc-run PLAN --validate --rank R` reports the seconds it took to read
    and validate the plan and its peak RSS above what it held before (the process and its
    libraries); the best time and the largest RSS of max(repeat, 3) runs."""
    walls, rss = [], 0.0
    for _ in range(max(repeat, 3)):
        p = subprocess.run([dtc_run, plan, "--validate", "--rank", str(rank)],
                           capture_output=True, timeout=timeout_s)
        out = p.stdout.decode(errors="replace")
        if p.returncode != 0:
            return None, first_error(p.stderr.decode(errors="replace"), p.returncode)
        m = re.search(r"read and validated in ([0-9.]+) s, peak RSS \+([0-9.]+) MiB", out)
        if not m:
            return None, "unexpected output: " + out.strip()[:200]
        walls.append(float(m.group(1)))
        rss = max(rss, float(m.group(2)))
    return {"start": min(walls), "start_rss": rss, "start_rank": rank}, None


def bench_case(dtc, model, strategy, replica_batch, repeat, timeout_s, workdir, context=1024,
               dtc_run=None):
    """Median wall, max peak RSS and the plan's bytes of `repeat` compiles (and a rank's start
    when `dtc_run` is given), or an error."""
    dp, pp, tp = mesh_degrees(strategy)
    # --batch-size is the global batch: `replica_batch` samples per data-parallel replica (a
    # pipeline splits them into pp micro-batches by default; with microbatches=M each replica
    # takes at least M samples, a multiple of M).
    per_replica = replica_batch
    m = micro_batches(strategy)
    if m:
        per_replica = max(m, (replica_batch + m - 1) // m * m)
    plan = os.path.join(workdir, "plan.dtc")
    cmd = [dtc, model, "--strategy", strategy, "--batch-size", str(per_replica * dp),
           "--optimizer", "adam", "--class-axis", "-1", "--dim", f"T={context}", "-o", plan]
    walls, rss, plan_bytes, err = [], 0.0, 0, ""
    for _ in range(repeat):
        wall, mib, rc, err = run_child(cmd, timeout_s)
        if rc != 0:
            return None, first_error(err, rc)
        walls.append(wall)
        rss = max(rss, mib)
        plan_bytes = os.path.getsize(plan)
    result = {"wall": statistics.median(walls), "rss": rss, "plan_mb": plan_bytes / 1e6,
              "world": dp * pp * tp}
    if dtc_run:
        start, start_err = bench_start(dtc_run, plan, largest_program_rank(err), repeat,
                                       timeout_s)
        if start_err:
            os.remove(plan)
            return None, "dtc-run --validate: " + start_err
        result.update(start)
    os.remove(plan)
    return result, None


def print_row(label, strategy, r):
    start = (f"{r['start']:8.3f} {r['start_rss']:9.1f} {r['start_rank']:>5}" if "start" in r
             else f"{'-':>8} {'-':>9} {'-':>5}")
    print(f"{label} {strategy:<20} {r['world']:>5} {r['wall']:8.2f} {r['rss']:9.1f} "
          f"{r['plan_mb']:8.2f} {start}   wall {verdict(r['wall'], TARGET_WALL_S)}, "
          f"memory {verdict(r['rss'], TARGET_RSS_MIB)}, "
          f"plan {verdict(r['plan_mb'], TARGET_PLAN_MB)}", flush=True)


def verdict(value, target):
    return "ok" if value < target else "OVER"


def growth_line(label, xs, values, unit):
    """"label: v0 -> v1 -> v2 unit (xR for xQ layers; slope unit/layer)"."""
    pairs = [(x, v) for x, v in zip(xs, values) if v is not None]
    if len(pairs) < 2:
        return f"  {label}: not enough cases"
    (x0, v0), (x1, v1) = pairs[0], pairs[-1]
    slope = (v1 - v0) / (x1 - x0)
    chain = " -> ".join(f"{v:.2f}" for _, v in pairs)
    ratio = f"x{v1 / v0:.2f}" if v0 else "-"
    return f"  {label:<26} {chain} {unit}  ({ratio} for x{x1 / x0:.1f} layers; {slope:+.3f} {unit}/layer)"


def main():
    ap = argparse.ArgumentParser(description="dtc-compile training compile: time, memory, plan")
    ap.add_argument("--dtc", default=os.path.join(REPO, "build", "tools", "dtc-compile"))
    ap.add_argument("--dtc-run", default=os.path.join(REPO, "build", "tools", "dtc-run"),
                    help="for the rank start figures (dtc-run PLAN --validate --rank R); "
                         "'' leaves them out")
    ap.add_argument("--bench-dir", default="/tmp/dtc-bench",
                    help="where the GPT-2 graphs are generated (kept and reused)")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter with numpy and onnx, for gen_gpt2_xl.py")
    ap.add_argument("--layers", default="12,24,48",
                    help="comma-separated layer counts (48 is GPT-2-XL)")
    ap.add_argument("--strategies", default=";".join(DEFAULT_STRATEGIES),
                    help="semicolon-separated --strategy values (default: %(default)s)")
    ap.add_argument("--replica-batch", type=int, default=8,
                    help="samples per data-parallel replica; --batch-size is this times dp")
    ap.add_argument("--repeat", type=int, default=1, help="compiles per case (median time)")
    ap.add_argument("--big", action="store_true",
                    help="also the 6.6 B-parameter shape (48 layers, d_model 3328, T=2048)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per compile")
    args = ap.parse_args()
    if not os.access(args.dtc, os.X_OK):
        sys.exit(f"error: {args.dtc}: not an executable dtc-compile (pass --dtc)")
    if args.dtc_run and not os.access(args.dtc_run, os.X_OK):
        sys.exit(f"error: {args.dtc_run}: not an executable dtc-run (pass --dtc-run, or "
                 f"--dtc-run '' to leave out the rank start figures)")
    layer_counts = sorted(int(x) for x in args.layers.split(","))
    strategies = [s.strip() for s in args.strategies.split(";") if s.strip()]

    start = time.perf_counter()
    models = {L: ensure_model(args.python, args.bench_dir, L) for L in layer_counts}
    header = (f"{'layers':>6} {'strategy':<20} {'world':>5} {'wall s':>8} {'peak MiB':>9} "
              f"{'plan MB':>8} {'start s':>8} {'start MiB':>9} {'rank':>5}   targets: wall < "
              f"{TARGET_WALL_S:g} s, memory < {TARGET_RSS_MIB:g} MiB, plan < "
              f"{TARGET_PLAN_MB:g} MB")
    print(header)
    print("-" * len(header))
    results, failures = {}, []
    with tempfile.TemporaryDirectory(prefix="dtc-compile-bench-") as workdir:
        for L in layer_counts:
            warm_page_cache(models[L])
            for s in strategies:
                r, err = bench_case(args.dtc, models[L], s, args.replica_batch, args.repeat,
                                    args.timeout, workdir, dtc_run=args.dtc_run)
                results[(L, s)] = r
                if err:
                    failures.append(f"{L} layers, {s}: {err}")
                    print(f"{L:>6} {s:<20} {'-':>5} {'-':>8} {'-':>9} {'-':>8}   FAILED",
                          flush=True)
                    continue
                print_row(f"{L:>6}", s, r)
        if args.big:
            # Sparse weights (26 GB) are not read into the page cache: the checksum skips holes.
            model = ensure_model(args.python, args.bench_dir, BIG_SHAPE["layers"], BIG_SHAPE)
            print(f"6.6 B shape ({BIG_SHAPE['layers']} layers, d_model {BIG_SHAPE['d_model']}, "
                  f"T={BIG_SHAPE['context']}):")
            for s in strategies:
                r, err = bench_case(args.dtc, model, s, args.replica_batch, args.repeat,
                                    args.timeout, workdir, context=BIG_SHAPE["context"],
                                    dtc_run=args.dtc_run)
                if err:
                    failures.append(f"6.6 B shape, {s}: {err}")
                    print(f"{'6.6B':>6} {s:<20}   FAILED", flush=True)
                    continue
                print_row(f"{'6.6B':>6}", s, r)

    def figure(L, s, key):
        r = results.get((L, s))
        return r[key] if r else None

    if len(layer_counts) > 1:
        print(f"\nGrowth with layers ({', '.join(map(str, layer_counts))}; target: linear, "
              f"so the ratio stays at or below the layer ratio):")
        for s in strategies:
            for key, name, unit in (("wall", "wall", "s"), ("rss", "peak", "MiB"),
                                    ("plan_mb", "plan", "MB")):
                print(growth_line(f"{s} {name}", layer_counts,
                                  [figure(L, s, key) for L in layer_counts], unit))
    worlds = sorted({results[(L, s)]["world"] for (L, s) in results if results[(L, s)]})
    if len(worlds) > 1:
        print("\nGrowth with world size (target: flat, ratio 1.00):")
        for L in layer_counts:
            by_world = {}
            for s in strategies:
                r = results.get((L, s))
                if r and mesh_degrees(s)[1:] == (1, 1):  # data parallelism: one program for all
                    by_world[r["world"]] = r
            ws = sorted(by_world)
            if len(ws) < 2:
                continue
            for key, name, unit in (("wall", "wall", "s"), ("rss", "peak", "MiB"),
                                    ("plan_mb", "plan", "MB")):
                vals = [by_world[w][key] for w in ws]
                chain = " -> ".join(f"{v:.2f}" for v in vals)
                print(f"  {L} layers {name:<5} world {' -> '.join(map(str, ws))}: {chain} {unit} "
                      f"(x{vals[-1] / vals[0]:.2f} for x{ws[-1] / ws[0]:g} ranks)")
    # Micro-batches: each pipeline strategy with microbatches=M against the same without it (M
    # = pp by default); the compile should be nearly flat in M.
    pairs = []
    for s in strategies:
        m = micro_batches(s)
        base = ",".join(p for p in s.split(",") if not p.startswith("microbatches="))
        if m and base in strategies:
            pairs.append((base, s, mesh_degrees(base)[1], m))
    if pairs:
        print("\nGrowth with micro-batches (target: nearly flat, ratio well below the M ratio):")
        for L in layer_counts:
            for base, s, m0, m1 in pairs:
                a, b = results.get((L, base)), results.get((L, s))
                if not (a and b):
                    continue
                for key, name, unit in (("wall", "wall", "s"), ("rss", "peak", "MiB"),
                                        ("plan_mb", "plan", "MB"), ("start", "start", "s")):
                    if key in a and key in b:
                        ratio = f"x{b[key] / a[key]:.2f}" if a[key] else "-"
                        print(f"  {L} layers {name:<5} M={m0} -> M={m1}: {a[key]:.3f} -> "
                              f"{b[key]:.3f} {unit} ({ratio} for x{m1 / m0:g} micro-batches)")
    if args.dtc_run:
        print(f"\nstart s, start MiB: a rank's start, `dtc-run PLAN --validate --rank R` (R, "
              f"'rank': the rank with the largest program): the seconds it takes to read and "
              f"validate the plan as that rank does (best of {max(args.repeat, 3)} runs) and its "
              f"peak RSS above what the process held before (its libraries).")
    print(f"\nwall s: median of {args.repeat} run(s) of the whole dtc-compile process (import, "
          f"training passes, lowering, model checksums, writing the plan); peak MiB: its maximum "
          f"RSS (the model files are read once beforehand, so the page cache is warm); batch "
          f"{args.replica_batch} per replica, T=1024, Adam.")
    print(f"total benchmark time {time.perf_counter() - start:.1f} s")
    for f in failures:
        print("FAILED " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
