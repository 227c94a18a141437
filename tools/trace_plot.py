#!/usr/bin/python3
"""Draws a dtc-run --trace file (Chrome trace JSON) as a PNG timeline: one lane per rank and
thread (compute: kernels, bucket launches and waits; comm: collectives), over a window of
training steps taken from rank 0's "step" spans on the host thread.

    /usr/bin/python3 tools/trace_plot.py TRACE.json OUT.png [--first-step K] [--steps N]

Needs matplotlib (Debian's python3-matplotlib, under /usr/bin/python3). Kernels are coloured by
kind: forward, backward (ops with Grad in their name, and the gradient Gemm/MatMulT/Reduce
kernels named .../grad/...), optimizer, all-reduce launch, wait; collectives by whether they are
gradient buckets or blocking statistics all-reduces (synchronized BatchNorm, metrics).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COLOURS = {
    "forward": "#4c72b0",
    "backward": "#dd8452",
    "optimizer": "#55a868",
    "launch": "#000000",
    "wait": "#c44e52",
    "bucket": "#8172b3",
    "blocking": "#937860",
    "other": "#bbbbbb",
}


def kind_of(e):
    name, cat, tid = e.get("name", ""), e.get("cat", ""), e.get("tid", 0)
    if tid == 1:
        return "bucket" if name.startswith("bucket") else "blocking"
    if cat == "wait":
        return "wait"
    if cat == "all-reduce":
        return "launch"
    if cat in ("SGD", "Adam", "AdamW", "SumSquares", "ClipGradNormScale", "ZeroGradient"):
        return "optimizer"
    if "Grad" in cat or "/grad/" in name:
        return "backward"
    if cat == "copy":
        return "other"
    return "forward"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--first-step", type=int, default=None,
                    help="first step drawn (default: the middle of the run)")
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()
    with open(args.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e for e in events if e.get("tid") == 2 and e.get("pid") == 0
                    and e.get("cat") == "step"), key=lambda e: e["ts"])
    if not steps:
        sys.exit("error: %s: no step spans on rank 0's host thread (a training trace?)" % args.trace)
    first = args.first_step if args.first_step is not None else len(steps) // 2
    first = max(0, min(first, len(steps) - 1))
    last = min(len(steps) - 1, first + args.steps - 1)
    t0 = steps[first]["ts"]
    t1 = steps[last]["ts"] + steps[last]["dur"]
    ranks = sorted({e["pid"] for e in events})
    lanes = []
    for r in ranks:
        lanes += [(r, 0, "rank %d compute" % r), (r, 1, "rank %d comm" % r)]
    fig, ax = plt.subplots(figsize=(14, 0.55 * len(lanes) + 1.4), dpi=110)
    for y, (r, tid, _) in enumerate(lanes):
        spans = {}
        for e in events:
            if e["pid"] != r or e.get("tid") != tid:
                continue
            b, d = e["ts"], max(e.get("dur", 0), 1)
            if b + d < t0 or b > t1:
                continue
            spans.setdefault(kind_of(e), []).append(((b - t0) / 1000.0, d / 1000.0))
        for k, xs in spans.items():
            ax.broken_barh(xs, (y - 0.38, 0.76), facecolors=COLOURS[k], linewidth=0)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([name for _, _, name in lanes])
    ax.invert_yaxis()
    ax.set_xlim(0, (t1 - t0) / 1000.0)
    ax.set_xlabel("ms since the start of step %d (rank 0)" % first)
    ax.set_title("dtc-run --trace: %s, steps %d-%d" % (args.trace.split("/")[-1], first, last))
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items()], ncol=8,
              loc="upper center", bbox_to_anchor=(0.5, -0.32), frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, bbox_inches="tight")
    print("wrote %s (steps %d-%d, %.1f ms)" % (args.out, first, last, (t1 - t0) / 1000.0))


if __name__ == "__main__":
    main()
