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
               run programs of their own. The GPTs use SGD with momentum (see cases()). Every
               case logs single device's training accuracy (the vocabulary-parallel loss's
               in-graph predicted class, with the same first-index rule for ties).
  plans        The collectives the pass inserts, from --emit plan-text: the MLP's column/row
               pair costs one tp all-reduce (forward; its input is data, so no backward one),
               the GPT two forward and two backward per block (Megatron's count); the split
               weights are listed with their shards; the tied GPT's loss on vocabulary-split
               logits: no all-gather, four all-reduces (max, sum, the predicted class's max,
               sum) of B*S floats, the labels checked before the first collective.
  state        --dump-gradients and --export of a tp=2 plan write whole tensors (law, checker).
  checkpoints  Sharded checkpoints of tp plans: one shard per program and tp rank (tp peers run
               one program on different slices); tp=2 (MLP, Adam) and dp=2,tp=2 with --zero 1
               (each tp rank's shard holds both dp replicas' optimizer-state shards), and tp=3
               (uneven: shards of different shapes from two programs): a run
               stopped after its step-4 checkpoint, whose step-4 manifest is then lost, resumes
               from step 2 and ends bit for bit where an uninterrupted 6-step run does
               (parameters, and every persistent buffer of every shard).
  errors       --tp-shard naming no weight, a dimension with fewer elements than tp, an uneven
               split that would need an all-gather of unequal parts (tensor and divisor named);
               a label outside the tied GPT's classes fails single, tp=2, dp=2,tp=2 and tp=3
               with the loss node and the label named on every rank of its tp group.
  sequence-parallel
               --sequence-parallel (Korthikanti et al. 2022): the law on the GPT and the tied
               GPT at tp=2 (the GPT also at batch 16 = sequence 16) and on dp=2,tp=2 (4 ranks),
               the tied GPT at tp=4, with --clip-grad-norm and on dp=2,tp=2 with --zero 2, the
               GPT on pp=2,tp=2, the tied GPT on dp=2,pp=2,tp=2 (8 ranks), and a sequence-first
               ([S, B, H]) block built here at tp=2; the GPT plan's reduce-scatters and
               all-gathers on group tp against plain tp's all-reduces (the blocks' exchange the
               same bytes; the extra: the first block's entry, the gather before the head, the
               replicated parameters' gradients), the region's activations at 1/T, rank 0's
               arena against plain tp's; errors: without tp > 1, a sequence that does not
               divide by T, activations without a sequence axis.

Usage: tp_train.py --build BUILD_DIR [--only equivalence,plans,checkpoints,errors,sequence-parallel]
                   [--keep]
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dp_train import GOLDEN, MODELS, STEPS, CheckFailed, Runner, assert_law  # noqa: E402
from pp_train import same_losses, same_params  # noqa: E402

GROUPS = ["equivalence", "plans", "checkpoints", "errors", "sequence-parallel"]
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
            law = assert_law(single, params, grad1)
            return law + "; " + same_accuracy(single_rows, rows)

        r.check(f"equivalence/{name}", check)


def same_accuracy(single_rows, rows):
    """The epoch lines' train_accuracy equals single-device's: tp plans whose scores stay split
    by class (the vocabulary-parallel loss) count their in-graph predicted class, with the
    trainer's first-index rule for ties."""
    def accuracy(rs):
        return [x["train_accuracy"] for x in rs if x.get("event") == "epoch" and
                "train_accuracy" in x]
    a, b = accuracy(single_rows), accuracy(rows)
    if not a:
        raise CheckFailed("single device logged no accuracy")
    if a != b:
        raise CheckFailed(f"train accuracy {b}, single device {a}")
    return f"accuracy {b[-1]:.4f} as single"


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
        kinds = [(re.search(r"all-reduce-(\w+)", ln).group(1),
                  re.search(r'name="[^"]*tp_vocab_(\w+)"', ln).group(1)) for ln in loss]
        # max, sum of exp, the predicted class (accuracy; forward only), the label's logit.
        want = [("max", "max"), ("sum", "sum_exp"), ("max", "argmax"), ("sum", "target")]
        if kinds != want:
            raise CheckFailed(f"loss all-reduces {kinds}, expected {want}:\n" + "\n".join(loss))
        # Bytes per step of the loss's communication, from the plan's buffers: 4*B*S floats,
        # against the B*S*V floats of the logits an all-gather would assemble.
        b, s, v = 8, 16, 64
        moved = 0
        for ln in loss:
            out = re.search(r"(%\d+) = all-reduce", ln).group(1)
            buf = re.search(r"buffer " + out + r" .*@\d+\+(\d+)", text)
            moved += int(buf.group(1))
        if moved != 4 * b * s * 4:
            raise CheckFailed(f"the loss all-reduces move {moved} bytes, expected {4 * b * s * 4}")
        # The label check runs before the loss's first collective.
        lines = text.splitlines()
        check = next(i for i, ln in enumerate(lines) if "ai.dtc::CheckLabels(" in ln)
        first = next(i for i, ln in enumerate(lines) if "tp_vocab" in ln and "all-reduce" in ln)
        if check > first:
            raise CheckFailed("CheckLabels runs after the loss's collective:\n" + lines[first])
        return (f"no all-gather; loss all-reduces max, sum, max (predicted class), sum of "
                f"{b}x{s} floats: {moved} bytes per step instead of {b * s * v * 4} (logits "
                f"gathered); labels checked before them")

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
    r.check("errors/label-out-of-range", lambda: label_out_of_range(r))
    r.check("errors/tp-shard-fewer-than-tp", lambda: expect_compile_error(
        ["--strategy", "tp=16", "--tp-shard", "net.2.bias=0"],
        r"error: --tp-shard net.2.bias=0: dimension 0 of f32\[10\] has fewer elements than "
        r"tp=16"))


def label_out_of_range(r):
    """A label outside the tied GPT's 64 classes (70 at sample 3 of the first batch) fails the
    step on one device and on tp=2, dp=2,tp=2 and uneven tp=3 (the vocabulary-parallel loss
    reads each label on one rank only, so it checks them first): the error names the loss node
    and the label, every error printed is that one (each tp rank of the replica holding the
    label fails alike; MPI_Abort may end a peer before it prints), nothing is trained, and no
    rank hangs."""
    with np.load(os.path.join(GOLDEN, "gpt_data.npz")) as z:
        tokens, label = z["tokens"], z["label"].copy()
    label[3, 5] = 70
    data = r.unique("bad_labels", ".npz")
    np.savez(data, tokens=tokens, label=label)
    tied = os.path.join(MODELS, "gpt_tied_train.onnx")
    flags = ["--batch-size", "8", "--optimizer", "sgd", "--lr", "0.1", "--class-axis", "-1"]
    loss = r"node 'loss/SoftmaxCrossEntropyLoss(/tp_vocab_checked_labels)?' \([\w.]+\)"
    what = r": label 70 at sample 3 is out of range \[0, 64\)"
    seen = []
    for strategy, nproc in (("single", 0), ("tp=2", 2), ("dp=2,tp=2", 4), ("tp=3", 3)):
        plan = r.compile(tied, ["--strategy", strategy] + flags)
        log = r.unique("bad_labels", ".jsonl")
        cmd = [r.run_tool, plan, "--data", data, "--steps", "3", "--no-shuffle", "--log", log]
        if nproc:
            cmd += ["--nproc", str(nproc), "--timeout", "60"]
        t0 = time.monotonic()
        res = r.exec(cmd, timeout=120)
        seconds = time.monotonic() - t0
        err = res.stderr + res.stdout
        if res.returncode == 0:
            raise CheckFailed(f"{strategy}: exit 0:\n{err[-2000:]}")
        errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
        # dp=2,tp=2: only the first replica's slice (samples 0..3) holds the bad label; the
        # other replica's ranks are ended by MPI_Abort.
        bad = [ln for ln in errors if not re.search(r"^error: rank \d+: .*" + loss + what, ln)]
        if not errors or bad:
            raise CheckFailed(f"{strategy}: expected only errors matching {loss + what}:\n"
                              f"{err[-2000:]}")
        with open(log) as f:
            steps = [ln for ln in f if '"event": "step"' in ln or '"event":"step"' in ln]
        if steps:
            raise CheckFailed(f"{strategy}: {len(steps)} steps logged")
        seen.append(f"{strategy} ({len(errors)} rank(s) printed it, {seconds:.1f} s)")
    return "label error on " + ", ".join(seen)


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


PLAN_BUFFER = re.compile(r'^\s*buffer (%\d+) "([^"]*)" (\w+) \S+ @\d+\+(\d+)', re.M)
PLAN_COLLECTIVE = re.compile(
    r'^\s*\d+: (%\d+) = (all-reduce|all-gather|reduce-scatter)\S*\((%\d+)\) group="tp"', re.M)


def tp_traffic(text, parts):
    """The tp collectives of a plan text: {kind: (count, bytes of the whole tensors)} and the
    bytes one rank sends per step on a ring (all-reduce 2(T-1)/T of its tensor, all-gather and
    reduce-scatter (T-1)/T of the whole gathered or scattered tensor)."""
    size = {b: int(n) for b, _, _, n in PLAN_BUFFER.findall(text)}
    kinds, ring = {}, 0.0
    for out, kind, inp in PLAN_COLLECTIVE.findall(text):
        whole = size[out] if kind == "all-gather" else size[inp]
        count, total = kinds.get(kind, (0, 0))
        kinds[kind] = (count + 1, total + whole)
        ring += whole * (2 if kind == "all-reduce" else 1) * (parts - 1) / parts
    return kinds, ring


def activation_bytes(text):
    return sum(int(n) for _, _, kind, n in PLAN_BUFFER.findall(text) if kind == "activation")


def run_sequence_parallel(r):
    gpt_data = os.path.join(GOLDEN, "gpt_data.npz")
    gpt_sgd = ["--batch-size", "8", "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9",
               "--class-axis", "-1"]
    gpt = os.path.join(MODELS, "gpt_train.onnx")
    tied = os.path.join(MODELS, "gpt_tied_train.onnx")
    run_args = ["--steps", str(STEPS), "--no-shuffle"]
    baselines = {}
    # Batch 16 = sequence 16: the axes of [16, 16, 32] cannot be told apart; either split is
    # exact (the pass takes axis 1).
    gpt_b16 = ["--batch-size", "16"] + gpt_sgd[2:]
    cases = [("gpt/tp=2", gpt, "tp=2", 2, gpt_sgd),
             ("gpt/tp=2,batch=sequence", gpt, "tp=2", 2, gpt_b16),
             ("gpt_tied/tp=2", tied, "tp=2", 2, gpt_sgd),
             ("gpt/dp=2,tp=2", gpt, "dp=2,tp=2", 4, gpt_sgd),
             ("gpt_tied/dp=2,tp=2", tied, "dp=2,tp=2", 4, gpt_sgd),
             ("gpt_tied/tp=4", tied, "tp=4", 4, gpt_sgd),
             ("gpt/pp=2,tp=2", gpt, "pp=2,tp=2,microbatches=2", 4, gpt_sgd),
             ("gpt_tied/dp=2,pp=2,tp=2", tied, "dp=2,pp=2,tp=2,microbatches=2", 8, gpt_sgd),
             # The clipped norm counts the all-reduced (replicated) LayerNorm gradients once.
             ("gpt_tied/tp=2,clip-grad-norm", tied, "tp=2", 2,
              gpt_sgd + ["--clip-grad-norm", "0.1"]),
             ("gpt_tied/dp=2,tp=2,zero=2", tied, "dp=2,tp=2", 4, gpt_sgd, ["--zero", "2"])]
    for name, model, strategy, nproc, flags, *only_sp in cases:
        def check(model=model, strategy=strategy, nproc=nproc, flags=flags,
                  extra=only_sp[0] if only_sp else []):
            key = (model, tuple(flags))
            if key not in baselines:
                plan = r.compile(model, ["--strategy", "single"] + flags)
                baselines[key] = r.train(plan, gpt_data, 0, run_args)
            single, single_rows = baselines[key]
            plan = r.compile(model, ["--strategy", strategy, "--sequence-parallel"] + flags +
                             extra)
            params, rows = r.train(plan, gpt_data, nproc, run_args)
            same_losses(single_rows, rows)
            return assert_law(single, params)

        r.check(f"sequence-parallel/equivalence/{name}", check)

    def sequence_first():
        # Activations [S, B, H] (PyTorch's nn.Transformer default): the model transposes its
        # [N, 4, 8] input to [4, N, 8] and adds a learned position table [4, 1, 8], runs a
        # pre-LayerNorm block with two column/row pairs, and transposes back. The sequence axis
        # is 0: the reduce-scatters need no transpose, and the residual input (which carries
        # the position table's gradient) enters the region through a slice along axis 0: 2
        # reduce-scatters forward and 1 backward (the g-bar before the second pair).
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        rng = np.random.default_rng(1)

        def init(name, shape, scale=0.3, base=0.0):
            return numpy_helper.from_array(
                (base + rng.standard_normal(shape) * scale).astype(np.float32), name)

        nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
                 helper.make_node("Add", ["xt", "pos"], ["x0"])]
        inits = [init("pos", (4, 1, 8))]
        prev = "x0"
        for k in (1, 2):
            nodes += [
                helper.make_node("LayerNormalization", [prev, f"g{k}", f"b{k}"], [f"n{k}"]),
                helper.make_node("MatMul", [f"n{k}", f"w{k}a"], [f"h{k}"]),
                helper.make_node("Add", [f"h{k}", f"c{k}a"], [f"hb{k}"]),
                helper.make_node("Relu", [f"hb{k}"], [f"r{k}"]),
                helper.make_node("MatMul", [f"r{k}", f"w{k}b"], [f"o{k}"]),
                helper.make_node("Add", [f"o{k}", f"c{k}b"], [f"ob{k}"]),
                helper.make_node("Add", [prev, f"ob{k}"], [f"s{k}"])]
            inits += [init(f"g{k}", (8,), 0.1, 1.0), init(f"b{k}", (8,), 0.1),
                      init(f"w{k}a", (8, 16)), init(f"c{k}a", (16,), 0.1),
                      init(f"w{k}b", (16, 8)), init(f"c{k}b", (8,), 0.1)]
            prev = f"s{k}"
        nodes.append(helper.make_node("Transpose", [prev], ["y"], perm=[1, 0, 2]))
        graph = helper.make_graph(
            nodes, "seq_first", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8])], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        path, data = r.unique("seq_first", ".onnx"), r.unique("seq_first", ".npz")
        onnx.save(model, path)
        np.savez(data, x=rng.standard_normal((64, 4, 8)).astype(np.float32),
                 label=rng.standard_normal((64, 4, 8)).astype(np.float32))
        flags = ["--batch-size", "8", "--loss", "mse", "--optimizer", "sgd", "--lr", "0.1",
                 "--momentum", "0.9"]
        single, single_rows = r.train(r.compile(path, ["--strategy", "single"] + flags), data, 0,
                                      run_args)
        sp = ["--strategy", "tp=2", "--sequence-parallel"] + flags
        text = r.plan_text(path, sp)
        kinds, _ = tp_traffic(text, 2)
        if kinds.get("reduce-scatter", (0, 0))[0] != 3 or "/sp_rank_major" in text or \
                'name="x0/sp_copy/grad/AllGather"' not in text:
            raise CheckFailed(f"tp collectives {kinds}; expected reduce-scatters along axis 0 "
                              f"and the sliced residual input's all-gathered gradient")
        params, rows = r.train(r.compile(path, sp), data, 2, run_args)
        same_losses(single_rows, rows)
        return assert_law(single, params)

    r.check("sequence-parallel/equivalence/sequence-first", sequence_first)

    def plans():
        # Megatron's exchange: each tp all-reduce of a block's activations ([8, 16, 32] f32)
        # becomes a reduce-scatter (g, forward; backward: all-gather) or an all-gather (g-bar,
        # forward; backward: reduce-scatter) of the same tensor. The GPT's 2 blocks: forward 4
        # reduce-scatters, 3 all-gathers before column-parallel layers and 1 before the head;
        # backward 4 all-gathers, 3 reduce-scatters and the all-gather of the first block's
        # residual input (sequence-parallel from there); block 0's first LayerNorm stays
        # replicated (its f all-reduce as in plain tp), and the 12 replicated parameters read by
        # the region (LayerNorm weights and biases after block 0's first, row-parallel biases)
        # have their gradients all-reduced over tp.
        plain = r.plan_text(gpt, ["--strategy", "tp=2"] + gpt_sgd)
        sp = r.plan_text(gpt, ["--strategy", "tp=2", "--sequence-parallel"] + gpt_sgd)
        pk, pring = tp_traffic(plain, 2)
        sk, sring = tp_traffic(sp, 2)
        act = 8 * 16 * 32 * 4
        rs, ag = sk.get("reduce-scatter", (0, 0)), sk.get("all-gather", (0, 0))
        ar = sk.get("all-reduce", (0, 0))
        if pk.get("all-reduce") != (8, 8 * act) or rs != (7, 7 * act) or ag != (9, 9 * act) or \
                ar != (13, act + 12 * 32 * 4):
            raise CheckFailed(f"plain tp {pk}, sequence-parallel {sk}")
        if "ln1.weight/tp_copy/grad/AllReduce" not in sp:
            raise CheckFailed("the LayerNorm weights' gradients are not all-reduced over tp")
        # The region's activations (LayerNorms after block 0's first, residual adds, ln_f) are
        # [8, 8, 32] per rank instead of [8, 16, 32].
        region = re.compile(r"^/(blocks/blocks\.\d+/(ln\d/|Add)|ln_f/)\S*_output_0$")
        pb = {n: int(b) for _, n, kind, b in PLAN_BUFFER.findall(plain)
              if kind == "activation" and region.match(n) and not n.startswith("/blocks/blocks.0/ln1/")}
        sb = {n: int(b) for _, n, kind, b in PLAN_BUFFER.findall(sp) if n in pb}
        if len(pb) < 20 or sorted(sb) != sorted(pb) or any(2 * sb[n] != pb[n] for n in pb):
            raise CheckFailed(f"region activations: plain {pb}, sequence-parallel {sb}")
        pa, sa = activation_bytes(plain), activation_bytes(sp)
        parena = int(re.search(r"arena=(\d+)", plain).group(1))
        sarena = int(re.search(r"arena=(\d+)", sp).group(1))
        return (f"plain tp: {pk['all-reduce'][0]} all-reduces ({pk['all-reduce'][1]} B), ring "
                f"{pring:.0f} B/rank/step; sequence-parallel: {rs[0]} reduce-scatters "
                f"({rs[1]} B), {ag[0]} all-gathers ({ag[1]} B), {ar[0]} all-reduces ({ar[1]} B), "
                f"ring {sring:.0f} B/rank/step; the region's {len(pb)} activations "
                f"{sum(sb.values())} B vs {sum(pb.values())} B; all activation buffers {sa} B vs {pa} B "
                f"({sa / pa:.2f}x), arena {sarena} B vs {parena} B ({sarena / parena:.2f}x)")

    r.check("sequence-parallel/plans/gpt", plans)

    mlp = os.path.join(MODELS, "mlp_digits.onnx")
    mlp_flags = ["--batch-size", "16", "--optimizer", "sgd", "--lr", "0.05"]
    r.check("sequence-parallel/errors/no-tp", lambda: r.expect_compile_error(
        mlp, mlp_flags + ["--strategy", "dp=2", "--sequence-parallel"],
        r"error: --sequence-parallel: .*needs --strategy with tp > 1"))
    r.check("sequence-parallel/errors/no-sequence-axis", lambda: r.expect_compile_error(
        mlp, mlp_flags + ["--strategy", "tp=2", "--sequence-parallel"],
        r"error: value '.*': --sequence-parallel: cannot determine the sequence axis"))

    def indivisible():
        # A column/row pair on activations [N, 6, 8] at tp=4: the hidden 16 splits, the
        # sequence 6 does not.
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        rng = np.random.default_rng(0)
        w = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (8, 16)), ("w2", (16, 8)))]
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["o"]),
             helper.make_node("Add", ["x", "o"], ["y"])], "seq6",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6, 8])], w)
        path = r.unique("seq6", ".onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
        return r.expect_compile_error(path, ["--batch-size", "2", "--loss", "mse", "--strategy",
                                             "tp=4", "--sequence-parallel"],
                                      r"error: value 'o': --sequence-parallel: the sequence axis "
                                      r"1 of f32\[2,6,8\] \(size 6\) does not divide by tp=4")

    r.check("sequence-parallel/errors/indivisible-sequence", indivisible)


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
            "errors": run_errors, "sequence-parallel": run_sequence_parallel}
    r.run_groups([runs[g] for g in groups], args.keep)


if __name__ == "__main__":
    main()
