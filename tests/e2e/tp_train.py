#!/usr/bin/env python3
"""End-to-end checks of tensor parallelism (dtc-compile --strategy tp=T, alone and in meshes
with dp and pp; dtc-run --nproc).

Groups (--only takes a comma-separated subset; all by default):
  equivalence  The law of e2e/dp_train.py: parameters after 5 steps (--no-shuffle
               --save-params, whole tensors gathered from the shards) equal --strategy single on
               the same global batch, per tensor max|tp - single| / max(max|single|, 1e-2) <=
               1e-5 (Adam noise left out), and every logged loss matches (rel 1e-4). Cases: the
               seed's 10-node hidden layer split 5/5 (models/mlp_seed.onnx) at tp=2; the digits
               MLP at tp=2 and tp=4 (its 10 outputs do not divide by 4: the row-parallel layer
               splits only its 32 inputs); the CNN (Conv split by output channels, BatchNorm
               split with them, Conv split by input channels); the GPT (heads split, fused Q/K/V
               weight in 3 blocks); the tied-embedding GPT (vocabulary-split embedding with a
               masked lookup, its tied output projection column-parallel); dp=2,tp=2 (MLP, GPT)
               and pp=2,tp=2 on 4 ranks; the tied GPT on the full mesh dp=2,pp=2,tp=2 (8
               oversubscribed ranks); --clip-grad-norm (split gradients' squares summed over
               tp); the tied GPT's vocabulary-parallel cross-entropy at tp=4 and dp=2,tp=2
               (every tied case runs it); uneven splits (10 hidden features on tp=4, 32 on
               tp=3 and dp=2,tp=3, the tied GPT's vocabulary of 64 on tp=3), whose tp ranks
               run programs of their own. The GPTs use SGD with momentum (see cases()).
  plans        The collectives the pass inserts, from --emit plan-text: the MLP's column/row
               pair costs one tp all-reduce (forward; its input is data, so no backward one),
               the GPT two forward and two backward per block (Megatron's count); the split
               weights are listed with their shards; the tied GPT's loss on vocabulary-split
               logits: no all-gather, three all-reduces (max, sum, sum) of B*S floats.
  state        --dump-gradients and --export of a tp=2 plan write whole tensors (law, checker).
  checkpoints  Sharded checkpoints of tp plans: one shard per program and tp rank (tp peers run
               one program on different slices); tp=2 (MLP, Adam) and dp=2,tp=2 with --zero 1
               (each tp rank's shard holds both dp replicas' optimizer-state shards), and tp=3
               (uneven: shards of different shapes from two programs): a run
               stopped after its step-4 checkpoint, whose step-4 manifest is then lost, resumes
               from step 2 and ends bit for bit where an uninterrupted 6-step run does
               (parameters, and every persistent buffer of every shard).
  errors       --tp-shard naming no weight, a dimension with fewer elements than tp, an uneven
               split that would need an all-gather of unequal parts (tensor and divisor named).

Usage: tp_train.py --build BUILD_DIR [--only equivalence,plans,checkpoints,errors] [--keep]
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dp_train import GOLDEN, MODELS, STEPS, CheckFailed, Runner, assert_law  # noqa: E402
from pp_train import same_losses, same_params  # noqa: E402

GROUPS = ["equivalence", "plans", "checkpoints", "errors"]
def cases():
    digits = os.path.join(MODELS, "data", "digits_train.npz")
    gpt_data = os.path.join(GOLDEN, "gpt_data.npz")
    cnn_data = os.path.join(GOLDEN, "cnn_data.npz")
    sgd = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]
    # The GPTs train with SGD: Adam divides by sqrt(v), which turns float rounding in the split
    # contractions into differences above the law's bound on small gradients (measured 3e-5
    # after 5 steps, against 1.7e-7 with SGD).
    gpt_sgd = ["--batch-size", "8", "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9",
               "--class-axis", "-1"]
    seed = os.path.join(MODELS, "mlp_seed.onnx")
    mlp = os.path.join(MODELS, "mlp_digits.onnx")
    cnn = os.path.join(MODELS, "cnn_train.onnx")
    gpt = os.path.join(MODELS, "gpt_train.onnx")
    tied = os.path.join(MODELS, "gpt_tied_train.onnx")
    # name, model, data, flags, strategy, nproc, adam
    return [
        ("mlp_seed/tp=2", seed, digits, sgd, "tp=2", 2, False),
        ("mlp_digits/tp=2", mlp, digits, sgd, "tp=2", 2, False),
        ("mlp_digits/tp=4", mlp, digits, sgd, "tp=4", 4, False),
        ("mlp_digits/dp=2,tp=2", mlp, digits, sgd, "dp=2,tp=2", 4, False),
        ("mlp_digits/pp=2,tp=2", mlp, digits, sgd, "pp=2,tp=2,microbatches=2", 4, False),
        ("cnn/tp=2", cnn, cnn_data, sgd, "tp=2", 2, False),
        ("gpt/tp=2", gpt, gpt_data, gpt_sgd, "tp=2", 2, False),
        ("gpt_tied/tp=2", tied, gpt_data, gpt_sgd, "tp=2", 2, False),
        ("gpt/dp=2,tp=2", gpt, gpt_data, gpt_sgd, "dp=2,tp=2", 4, False),
        ("gpt_tied/tp=2,clip-grad-norm", tied, gpt_data, gpt_sgd + ["--clip-grad-norm", "0.1"],
         "tp=2", 2, False),
        ("gpt_tied/dp=2,pp=2,tp=2", tied, gpt_data, gpt_sgd, "dp=2,pp=2,tp=2,microbatches=2", 8,
         False),
        # Vocabulary-parallel cross-entropy (the tied GPT's logits stay split by vocabulary; its
        # 64 classes divide by 4, its 2 heads do not, so attention stays replicated at tp=4).
        ("gpt_tied/tp=4", tied, gpt_data, gpt_sgd, "tp=4", 4, False),
        ("gpt_tied/dp=2,tp=2", tied, gpt_data, gpt_sgd, "dp=2,tp=2", 4, False),
        # Uneven splits (numpy.array_split sizes, one program per shape): the seed's 10 hidden
        # features on 4 ranks (3, 3, 2, 2); the digits MLP's 32 on 3 (11, 11, 10), also with
        # dp=2; the tied GPT on 3 ranks (vocabulary 22, 21, 21 with the vocabulary-parallel
        # loss, MLP hidden 43, 43, 42; its 2 heads stay replicated).
        ("mlp_seed/tp=4,uneven", seed, digits, sgd, "tp=4", 4, False),
        ("mlp_digits/tp=3,uneven", mlp, digits, sgd, "tp=3", 3, False),
        ("mlp_digits/dp=2,tp=3,uneven", mlp, digits, sgd, "dp=2,tp=3", 6, False),
        ("gpt_tied/tp=3,uneven", tied, gpt_data, gpt_sgd, "tp=3", 3, False),
    ]


def run_equivalence(r):
    run_args = ["--steps", str(STEPS), "--no-shuffle"]
    baselines = {}
    for name, model, data, flags, strategy, nproc, adam in cases():
        def check(model=model, data=data, flags=flags, strategy=strategy, nproc=nproc,
                  adam=adam):
            key = (model, tuple(flags))
            if key not in baselines:
                plan = r.compile(model, ["--strategy", "single"] + flags)
                params, rows = r.train(plan, data, 0, run_args)
                grad1 = r.gradients(plan, data) if adam else None
                baselines[key] = (params, rows, grad1)
            single, single_rows, grad1 = baselines[key]
            plan = r.compile(model, ["--strategy", strategy] + flags)
            params, rows = r.train(plan, data, nproc, run_args)
            same_losses(single_rows, rows)
            return assert_law(single, params, grad1)

        r.check(f"equivalence/{name}", check)


def run_plans(r):
    def tp_all_reduces(model, flags):
        text = r.plan_text(os.path.join(MODELS, model), ["--strategy", "tp=2"] + flags)
        return [ln for ln in text.splitlines() if "all-reduce" in ln and 'group="tp"' in ln], text

    def mlp_pair():
        # Column-parallel then row-parallel: one all-reduce forward; the backward one (of the
        # input's gradient) is not needed, since the input is data.
        tp, text = tp_all_reduces("mlp_digits.onnx",
                                  ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05"])
        if len(tp) != 1:
            raise CheckFailed(f"{len(tp)} tp all-reduces, expected 1:\n" + "\n".join(tp))
        shards = re.findall(r"shard=\S+", text)
        if len(shards) < 3:
            raise CheckFailed(f"sharded buffers: {shards}")
        return f"1 tp all-reduce; sharded: {' '.join(sorted(set(shards)))}"

    def gpt_blocks():
        # Megatron's count: per transformer block two all-reduces forward (after attention and
        # after the MLP) and two backward (the gradients of the two LayerNorm outputs).
        tp, _ = tp_all_reduces("gpt_train.onnx", ["--batch-size", "8", "--optimizer", "sgd",
                                                  "--lr", "0.1", "--class-axis", "-1"])
        if len(tp) != 8:
            raise CheckFailed(f"{len(tp)} tp all-reduces for 2 blocks, expected 8:\n" +
                              "\n".join(tp))
        return "8 tp all-reduces for 2 blocks (2 forward + 2 backward each)"

    def state():
        # --dump-gradients and --export write whole tensors assembled from the shards.
        import numpy as np
        import onnx
        from onnx import numpy_helper
        model = os.path.join(MODELS, "gpt_tied_train.onnx")
        data = os.path.join(GOLDEN, "gpt_data.npz")
        flags = ["--batch-size", "8", "--optimizer", "sgd", "--lr", "0.1", "--class-axis", "-1"]
        single = r.gradients(r.compile(model, ["--strategy", "single"] + flags), data)
        plan = r.compile(model, ["--strategy", "tp=2"] + flags)
        g, e = r.unique("grads", ".npz"), r.unique("export", ".onnx")
        res = r.exec([r.run_tool, plan, "--data", data, "--steps", "1", "--no-shuffle",
                      "--dump-gradients", g, "--export", e, "--nproc", "2", "--timeout", "60"])
        if res.returncode != 0:
            raise CheckFailed(f"dtc-run failed: {(res.stderr + res.stdout).strip()[-2000:]}")
        with np.load(g) as z:
            grads = {k: z[k] for k in z.files}
        msg = assert_law(single, grads)
        m = onnx.load(e)
        onnx.checker.check_model(m)
        w = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
        if w["tok.weight"].shape != (64, 32):
            raise CheckFailed(f"exported tok.weight has shape {w['tok.weight'].shape}")
        return "gradients " + msg + "; export whole (tok.weight 64x32), checker ok"

    def vocab_parallel_loss():
        # The tied GPT's loss on logits split by vocabulary: no all-gather of the B*S*V logits,
        # three all-reduces of B*S floats (max, sum of exp, the label's logit) instead.
        flags = ["--batch-size", "8", "--optimizer", "sgd", "--lr", "0.1", "--class-axis", "-1"]
        text = r.plan_text(os.path.join(MODELS, "gpt_tied_train.onnx"),
                           ["--strategy", "tp=2"] + flags)
        gathers = [ln for ln in text.splitlines() if "all-gather" in ln]
        if gathers:
            raise CheckFailed("all-gathers left:\n" + "\n".join(gathers))
        loss = [ln for ln in text.splitlines() if "all-reduce" in ln and "tp_vocab" in ln]
        kinds = sorted(re.search(r"all-reduce-(\w+)", ln).group(1) for ln in loss)
        if kinds != ["max", "sum", "sum"]:
            raise CheckFailed(f"loss all-reduces {kinds}, expected max, sum, sum:\n" +
                              "\n".join(loss))
        # Bytes per step of the loss's communication, from the plan's buffers: 3*B*S floats,
        # against the B*S*V floats of the logits an all-gather would assemble.
        b, s, v = 8, 16, 64
        moved = 0
        for ln in loss:
            out = re.search(r"(%\d+) = all-reduce", ln).group(1)
            buf = re.search(r"buffer " + out + r" .*@\d+\+(\d+)", text)
            moved += int(buf.group(1))
        if moved != 3 * b * s * 4:
            raise CheckFailed(f"the loss all-reduces move {moved} bytes, expected {3 * b * s * 4}")
        return (f"no all-gather; loss all-reduces max, sum, sum of {b}x{s} floats: "
                f"{moved} bytes per step instead of {b * s * v * 4} (logits gathered)")

    r.check("plans/mlp-column-row-pair", mlp_pair)
    r.check("plans/vocab-parallel-loss", vocab_parallel_loss)
    r.check("state/dump-gradients-and-export", state)
    r.check("plans/gpt-blocks", gpt_blocks)


def run_errors(r):
    model = os.path.join(MODELS, "mlp_digits.onnx")
    flags = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05"]

    def expect_compile_error(extra, pattern):
        return r.expect_compile_error(model, flags + extra, pattern)

    r.check("errors/tp-shard-unknown", lambda: expect_compile_error(
        ["--strategy", "tp=2", "--tp-shard", "nope=0"], r"error: --tp-shard nope=0"))
    # An uneven split that would need an all-gather of unequal parts (the output layer's bias
    # is added replicated): named with its size and the divisor.
    r.check("errors/tp-shard-uneven-gather", lambda: expect_compile_error(
        ["--strategy", "tp=4", "--tp-shard", "net.2.bias=0"],
        r"error: value 'net.2.bias' \(f32\[10\]\): dimension 0 of size 10 is split unevenly "
        r"over tp=4"))
    # The GPT's fused Q/K/V projection forced split on 5 ranks: 96 features (2 heads) do not
    # divide, and the heads' Reshape needs them whole: the projection's output and the divisor
    # are named.
    gpt = os.path.join(MODELS, "gpt_train.onnx")
    r.check("errors/heads-not-dividing", lambda: r.expect_compile_error(
        gpt, ["--batch-size", "8", "--optimizer", "sgd", "--class-axis", "-1", "--strategy",
              "tp=5", "--tp-shard", "blocks.0.attn.qkv.weight=0"],
        r"error: value '/blocks/blocks.0/attn/qkv/Add_output_0' \(f32\[8,16,96\]\): dimension "
        r"2 of size 96 is split unevenly over tp=5"))
    r.check("errors/tp-shard-fewer-than-tp", lambda: expect_compile_error(
        ["--strategy", "tp=16", "--tp-shard", "net.2.bias=0"],
        r"error: --tp-shard net.2.bias=0: dimension 0 of f32\[10\] has fewer elements than "
        r"tp=16"))


def run_checkpoints(r):
    model = os.path.join(MODELS, "mlp_digits.onnx")
    data = os.path.join(MODELS, "data", "digits_train.npz")
    adam = ["--batch-size", "16", "--optimizer", "adam", "--lr", "0.01"]
    for name, flags, nproc, shards in [("tp=2", ["--strategy", "tp=2"], 2, 2),
                                       ("dp=2,tp=2,zero=1",
                                        ["--strategy", "dp=2,tp=2", "--zero", "1"], 4, 2),
                                       # uneven: hidden 32 as 11, 11, 10 (two programs)
                                       ("tp=3,uneven", ["--strategy", "tp=3"], 3, 3)]:
        def case(flags=flags, nproc=nproc, shards=shards, name=name):
            plan = r.compile(model, adam + flags)
            ck_full, ck = r.unique("ck-full", ""), r.unique("ck", "")
            full_params = r.unique("full", ".npz")
            base = [r.run_tool, plan, "--data", data, "--nproc", str(nproc), "--timeout", "60",
                    "--no-shuffle"]
            for cmd in (base + ["--steps", "6", "--checkpoint-dir", ck_full,
                                "--checkpoint-every", "6", "--save-params", full_params],
                        base + ["--steps", "4", "--checkpoint-dir", ck,
                                "--checkpoint-every", "2"]):
                out = r.exec(cmd)
                if out.returncode != 0:
                    raise CheckFailed((out.stderr + out.stdout)[-2000:])
            files = sorted(f for f in os.listdir(ck) if f.startswith("ckpt-00000004.shard-"))
            if len(files) != shards:
                raise CheckFailed(f"step 4 has shards {files}, expected {shards}")
            # The step-4 manifest lost (a kill between its shards and its manifest): the run
            # resumes from step 2.
            os.remove(os.path.join(ck, "ckpt-00000004.manifest.json"))
            resumed = r.unique("resumed", ".npz")
            out = r.exec(base + ["--steps", "6", "--checkpoint-dir", ck, "--checkpoint-every",
                                 "2", "--resume", "--save-params", resumed])
            if out.returncode != 0 or "resuming from " + os.path.join(ck, "ckpt-00000002") \
                    not in out.stderr:
                raise CheckFailed(f"exit {out.returncode}, expected a resume from step 2:\n"
                                  + (out.stderr + out.stdout)[-2000:])
            with np.load(full_params) as a, np.load(resumed) as b:
                same_params({k: a[k] for k in a.files}, {k: b[k] for k in b.files})
                params = len(a.files)
            state = 0
            for f in sorted(os.listdir(ck_full)):
                if ".shard-" not in f:
                    continue
                with np.load(os.path.join(ck_full, f)) as a, np.load(os.path.join(ck, f)) as b:
                    same_params({k: a[k] for k in a.files if k != "__meta__"},
                                {k: b[k] for k in b.files if k != "__meta__"})
                    state += len(a.files) - 1
            shutil.rmtree(ck_full, ignore_errors=True)
            shutil.rmtree(ck, ignore_errors=True)
            return (f"{shards} shards per step; after resume {params} parameters and {state} "
                    f"persistent buffers bit-identical")

        r.check(f"checkpoints/resume/{name}", case)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--only", default=",".join(GROUPS))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    groups = [g for g in args.only.split(",") if g]
    for g in groups:
        if g not in GROUPS:
            sys.exit(f"unknown group '{g}' (known: {', '.join(GROUPS)})")
    tmp = tempfile.mkdtemp(prefix="dtc-tp-")
    r = Runner(os.path.abspath(args.build), tmp)
    runs = {"equivalence": run_equivalence, "plans": run_plans, "checkpoints": run_checkpoints,
            "errors": run_errors}
    r.run_groups([runs[g] for g in groups], args.keep)


if __name__ == "__main__":
    main()
