#!/usr/bin/env python3
# Strategy benchmark (issue 15): the step time of one GPT on the same global batch under single,
# dp=2, pp=2 (1F1B, --microbatches micro-batches), tp=2 and tp=2 --sequence-parallel, one thread
# per rank, with what each strategy pays for it:
#   ms/step      median over the steps after --warmup of one run (the trainer's own step time:
#                1000 * samples per step / samples_per_s of its "step" log lines); the runs of the
#                strategies alternate, --repeats times, and the table gives the min and the
#                median of the runs' medians (the machine is shared);
#   vs dp=2      the median's ratio to dp=2's;
#   comm/rank    bytes one rank sends per step (the busiest rank), counted from the plan
#                (dtc-compile --emit plan-text): an all-reduce of B bytes over a group of g sends
#                2(g-1)/g B on a ring, an all-gather or reduce-scatter of a whole tensor of B
#                bytes (g-1)/g B, a send its B (recvs send nothing); and the payload (the
#                tensors' own bytes) beside it;
#   arena        the largest per-rank arena of the plan (parameters, gradients, optimizer state,
#                activations: the memory plan's peak), and the largest peak RSS of a rank from a
#                short dtc-run --profile run.
# Models: the bundled GPT (models/gpt_train.onnx: 2 blocks, width 32, vocabulary 64, sequence 16,
# too small for compute to outweigh communication), and a larger GPT generated with
# tools/bench/gen_gpt2_xl.py (--gen-* flags; random weights; tied embedding, so tp splits its
# vocabulary and uses the vocabulary-parallel loss).
#
#     .venv/bin/python3 tools/bench/strategy_bench.py [--build build] [--models gpt,gen]
#         [--batch 16] [--steps 10] [--warmup 3] [--repeats 3] [--microbatches 4]
#         [--gen-layers 2 --gen-d-model 256 --gen-heads 4 --gen-context 64 --gen-vocab 4096]
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pp_bench import run  # noqa: E402  (one thread per rank, exits naming a failed command)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))

# label -> (--strategy, extra dtc-compile flags, ranks); pp's micro-batches filled in main().
STRATEGIES = [
    ("single", "single", [], 1),
    ("dp=2", "dp=2", [], 2),
    ("pp=2 1f1b", "pp=2,microbatches={M},schedule=1f1b", [], 2),
    ("tp=2", "tp=2", [], 2),
    ("tp=2 seq-par", "tp=2", ["--sequence-parallel"], 2),
]

BUFFER = re.compile(r'^\s*buffer (%\d+) "[^"]*" \w+ \S+ @\d+\+(\d+)', re.M)
PROGRAM = re.compile(r"^program (\d+) ranks=\[([\d,]*)\]", re.M)
COLLECTIVE = re.compile(
    r'^\s*\d+: (?:(%\d+(?:, %\d+)*) = )?(all-reduce|all-gather|reduce-scatter|send|recv|broadcast)'
    r'\S*\(([^)]*)\) group="(\w+)"', re.M)


def comm_per_rank(text, degrees):
    """{rank: (bytes sent per step on a ring, payload bytes)} from a whole plan's text."""
    out = {}
    starts = [(m.start(), m.group(1), m.group(2)) for m in PROGRAM.finditer(text)]
    for k, (begin, _, ranks) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(text)
        body = text[begin:end]
        size = {b: int(n) for b, n in BUFFER.findall(body)}
        sent = payload = 0.0
        for outs, kind, ins, group in COLLECTIVE.findall(body):
            g = degrees.get(group, 1)
            ins_b = sum(size.get(x.strip(), 0) for x in ins.split(",") if x.strip())
            outs_b = sum(size.get(x.strip(), 0) for x in outs.split(",") if x.strip())
            if kind == "all-reduce":
                payload += ins_b
                sent += 2 * (g - 1) / g * ins_b
            elif kind == "all-gather":
                payload += outs_b
                sent += (g - 1) / g * outs_b
            elif kind == "reduce-scatter":
                payload += ins_b
                sent += (g - 1) / g * ins_b
            elif kind in ("send", "broadcast"):
                payload += ins_b
                sent += ins_b
            else:  # recv
                payload += outs_b
        for r in ranks.split(","):
            if r:
                out[int(r)] = (sent, payload)
    return out


def compile_plan(args, tmp, model, strategy, flags):
    """(plan path, largest per-rank arena, (sent, payload) of the busiest rank)."""
    stem = re.sub(r"[^a-z0-9]+", "_", os.path.basename(model) + "_" + strategy + "".join(flags))
    out = os.path.join(tmp, stem + ".dtc")
    common = [model, "--strategy", strategy, "--batch-size", str(args.batch), "--optimizer",
              "sgd", "--lr", "0.01", "--class-axis", "-1"] + flags
    tool = os.path.join(args.build, "tools", "dtc-compile")
    r = run([tool] + common + ["-o", out])
    arenas = [int(m.group(1)) for m in re.finditer(r"arena (\d+) bytes", r.stderr)]
    text = run([tool] + common + ["--emit", "plan-text"]).stdout
    m = re.search(r"^mesh \S+ dp=(\d+) pp=(\d+) tp=(\d+)", text, re.M)
    degrees = dict(zip(("dp", "pp", "tp"), map(int, m.groups()))) if m else {}
    comm = comm_per_rank(text, degrees)
    return out, max(arenas), max(comm.values(), default=(0.0, 0.0))


def step_ms(args, plan, data, nproc):
    """Median step time (ms) after the warm-up, from the trainer's step lines."""
    log = plan + ".jsonl"
    if os.path.exists(log):
        os.remove(log)
    cmd = [os.path.join(args.build, "tools", "dtc-run"), plan, "--data", data, "--steps",
           str(args.steps), "--no-shuffle", "--log", log, "--print-every", "1000000"]
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    run(cmd)
    with open(log) as f:
        rates = [x["samples_per_s"] for x in map(json.loads, filter(str.strip, f))
                 if x.get("event") == "step"][args.warmup:]
    return statistics.median(1000.0 * args.batch / r for r in rates)


def peak_rss(args, plan, data, nproc):
    """The largest peak RSS (bytes) of a rank over a 2-step --profile run."""
    cmd = [os.path.join(args.build, "tools", "dtc-run"), plan, "--data", data, "--steps", "2",
           "--no-shuffle", "--profile", "--print-every", "1000000"]
    if nproc > 1:
        cmd += ["--nproc", str(nproc)]
    r = run(cmd)
    return max(int(x) for x in re.findall(r"peak RSS (\d+) bytes", r.stderr + r.stdout))


def make_gen_model(args, tmp):
    subprocess.run([sys.executable, os.path.join(HERE, "gen_gpt2_xl.py"), tmp, "--name", "gen_gpt",
                    "--layers", str(args.gen_layers), "--d-model", str(args.gen_d_model),
                    "--heads", str(args.gen_heads), "--context", str(args.gen_context),
                    "--vocab", str(args.gen_vocab), "--fill", "random"],
                   check=True, capture_output=True)
    return os.path.join(tmp, "gen_gpt.onnx")


def make_data(path, input_name, n, seq, vocab, seed):
    rng = np.random.default_rng(seed)
    np.savez(path, **{input_name: rng.integers(0, vocab, (n, seq)).astype(np.int64),
                      "label": rng.integers(0, vocab, (n, seq)).astype(np.int64)})


def mib(x):
    return f"{x / 2**20:.2f}"


def kib(x):
    return f"{x / 2**10:.1f}"


def bench_model(args, tmp, name, model, data, model_flags):
    plans = []
    for label, strategy, flags, nproc in STRATEGIES:
        strategy = strategy.replace("{M}", str(args.microbatches))
        plan, arena, (sent, payload) = compile_plan(args, tmp, model, strategy,
                                                    model_flags + flags)
        plans.append((label, plan, nproc, arena, sent, payload))
    times = {label: [] for label, *_ in plans}
    for _ in range(args.repeats):  # alternate the strategies: drift of the shared machine
        for label, plan, nproc, *_ in plans:
            times[label].append(step_ms(args, plan, data, nproc))
    rss = {label: peak_rss(args, plan, data, nproc) for label, plan, nproc, *_ in plans}
    dp = statistics.median(times["dp=2"])
    print(f"\n{name}: global batch {args.batch}, {args.steps} steps ({args.warmup} warm-up), "
          f"{args.repeats} runs each, 1 thread per rank; pp=2 1f1b with {args.microbatches} "
          f"micro-batches")
    print(f"{'strategy':>13} {'ranks':>5} {'ms/step min':>11} {'median':>8} {'vs dp=2':>7} "
          f"{'sent/rank KiB':>13} {'payload KiB':>11} {'arena MiB':>9} {'peak RSS MiB':>12}")
    for label, plan, nproc, arena, sent, payload in plans:
        t = times[label]
        med = statistics.median(t)
        print(f"{label:>13} {nproc:>5} {min(t):>11.1f} {med:>8.1f} {med / dp:>7.2f} "
              f"{kib(sent):>13} {kib(payload):>11} {mib(arena):>9} {mib(rss[label]):>12}")


def main():
    ap = argparse.ArgumentParser(description="step time of single, dp, pp and tp on a GPT")
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--models", default="gpt,gen", help="gpt (models/gpt_train.onnx), gen")
    ap.add_argument("--batch", type=int, default=16, help="global batch")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--gen-layers", type=int, default=2)
    ap.add_argument("--gen-d-model", type=int, default=256)
    ap.add_argument("--gen-heads", type=int, default=4)
    ap.add_argument("--gen-context", type=int, default=64)
    ap.add_argument("--gen-vocab", type=int, default=4096)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.steps <= args.warmup:
        sys.exit("error: --steps must exceed --warmup")
    tmp = tempfile.mkdtemp(prefix="dtc-strategybench-")
    try:
        run_models(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def run_models(args, tmp):
    n = args.batch * (args.steps + 1)
    for name in [m for m in args.models.split(",") if m]:
        if name == "gpt":
            model = os.path.join(REPO, "models", "gpt_train.onnx")
            data = os.path.join(tmp, "gpt_data.npz")
            make_data(data, "tokens", n, 16, 64, 1)
            title = ("models/gpt_train.onnx (2 blocks, width 32, 2 heads, vocabulary 64, "
                     "sequence 16)")
            model_flags = []
        elif name == "gen":
            model = make_gen_model(args, tmp)
            data = os.path.join(tmp, "gen_data.npz")
            make_data(data, "input_ids", n, args.gen_context, args.gen_vocab, 2)
            title = (f"generated GPT ({args.gen_layers} blocks, width {args.gen_d_model}, "
                     f"{args.gen_heads} heads, vocabulary {args.gen_vocab} tied, sequence "
                     f"{args.gen_context})")
            model_flags = ["--dim", f"T={args.gen_context}"]
        else:
            sys.exit(f"error: unknown model '{name}' (gpt, gen)")
        bench_model(args, tmp, title, model, data, model_flags)


if __name__ == "__main__":
    sys.exit(main())
