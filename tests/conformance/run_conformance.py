#!/usr/bin/env python3
"""ONNX node conformance: runs ONNX's own node test cases through dtc-compile and dtc-run.

The cases come from the generators shipped in the onnx wheel (onnx.backend.test.case.node) and
are cached on disk (model.onnx + test_data_set_N/{input,output}_M.pb, ONNX's layout) under
--cache/onnx-<version>. Each case is classified passed / failed / unsupported; see README.md.
Exit status 1 when a case fails that expected_failures.txt does not list.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.defs
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE_FORMAT = 1
MIN_OPSET, MAX_OPSET = 7, 23  # the ai.onnx opsets dtc's importer accepts
TIMEOUT_S = 30
# Ops that never need a kernel: the importer turns Constant nodes into constants, and expands
# the opset-23 function ops into primitive ops (compiler/onnx/FunctionOps.h).
COMPILE_TIME_OPS = {"Constant", "RMSNormalization", "RotaryEmbedding", "Attention"}
# ONNX element types dtc can take in and give back through .npz files (runtime/io/Npy.cpp).
NPZ_TYPES = {
    onnx.TensorProto.FLOAT, onnx.TensorProto.UINT8, onnx.TensorProto.INT8,
    onnx.TensorProto.UINT16, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
    onnx.TensorProto.INT64, onnx.TensorProto.BOOL, onnx.TensorProto.FLOAT16,
    onnx.TensorProto.DOUBLE, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
}
# Compile errors that mean "dtc does not (yet) do this" rather than "dtc got it wrong".
UNSUPPORTED_PATTERNS = ["no CPU kernel", "the CPU kernel supports", "has dtype", "unsupported",
                        "not supported", "unknown operator", "is unknown"]
CATEGORIES = ["opset", "kernel", "dtype", "other"]


# --- case cache -------------------------------------------------------------------------------
def _write_value(path, value, type_proto, name):
    if type_proto.HasField("map_type"):
        proto = numpy_helper.from_dict(value, name)
    elif type_proto.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, name)
    elif type_proto.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, name)
    elif isinstance(value, onnx.TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(np.asarray(value), name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def generate_cache(cache_dir):
    """Writes every node test case under cache_dir (ONNX's data layout) plus index.json."""
    import warnings
    import onnx.backend.test.case.node as node_cases

    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = node_cases.collect_testcases("")
    tmp = cache_dir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    index = {}
    for case in cases:
        d = os.path.join(tmp, case.name)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        entry = {"rtol": case.rtol, "atol": case.atol, "data_sets": 0}
        graph = case.model.graph
        try:
            for i, (inputs, outputs) in enumerate(case.data_sets):
                ds = os.path.join(d, f"test_data_set_{i}")
                os.makedirs(ds)
                for j, v in enumerate(inputs):
                    _write_value(os.path.join(ds, f"input_{j}.pb"), v, graph.input[j].type,
                                 graph.input[j].name)
                for j, v in enumerate(outputs):
                    _write_value(os.path.join(ds, f"output_{j}.pb"), v, graph.output[j].type,
                                 graph.output[j].name)
                entry["data_sets"] = i + 1
        except Exception as e:  # a value this onnx version cannot serialize: keep the model
            entry["data_error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        index[case.name] = entry
    with open(os.path.join(tmp, "index.json"), "w") as f:
        json.dump(index, f, indent=0, sort_keys=True)
    shutil.rmtree(cache_dir, ignore_errors=True)
    os.rename(tmp, cache_dir)
    return time.time() - t0


def load_index(cache_root):
    cache_dir = os.path.join(cache_root, f"onnx-{onnx.__version__}-v{CACHE_FORMAT}")
    gen_s = 0.0
    if not os.path.exists(os.path.join(cache_dir, "index.json")):
        print(f"generating the ONNX node test cases into {cache_dir} ...", flush=True)
        gen_s = generate_cache(cache_dir)
    with open(os.path.join(cache_dir, "index.json")) as f:
        return cache_dir, json.load(f), gen_s


def read_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


# --- what dtc has -----------------------------------------------------------------------------
def read_op_lists():
    with open(os.path.join(ROOT, "ops", "Ops.def")) as f:
        known = set(re.findall(r"^DTC_OP\((\w+)\)", f.read(), re.M))
    with open(os.path.join(ROOT, "ops", "cpu", "Kernels.def")) as f:
        kernels = set(re.findall(r'^DTC_CPU_KERNEL\(""\s*,\s*"(\w+)"', f.read(), re.M))
    return known, kernels


# --- classification before running ------------------------------------------------------------
class Unsupported(Exception):
    def __init__(self, category, reason):
        super().__init__(reason)
        self.category = category
        self.reason = reason


def _all_nodes(graph):
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _all_nodes(g)


def _check_type(tp, where):
    kind = tp.WhichOneof("value")
    if kind is None:
        return
    if kind != "tensor_type":
        raise Unsupported("other", f"{where} has type {kind.replace('_type', '')} "
                          "(dtc takes tensors only)")
    et = tp.tensor_type.elem_type
    if et not in NPZ_TYPES:
        raise Unsupported("dtype", f"{where} has dtype "
                          f"{onnx.TensorProto.DataType.Name(et).lower()}")


def _form(schema, ignore=()):
    attrs = sorted((a.name, int(a.type), a.required, a.default_value.SerializeToString())
                   for a in schema.attributes.values() if a.name not in ignore)
    ins = [(i.name, int(i.option), i.is_homogeneous) for i in schema.inputs]
    outs = [(o.name, int(o.option), o.is_homogeneous) for o in schema.outputs]
    return (attrs, ins, outs, schema.min_input, schema.max_input, schema.min_output,
            schema.max_output)


def _types(schema):
    return {t.type_param_str: set(t.allowed_type_strs) for t in schema.type_constraints}


# Element types no test input of a runnable case can have (NPZ_TYPES excludes them).
EXOTIC_TYPES = re.compile(r"(bfloat16|float[468]\w*|u?int[24]|complex\d+|string)\)")
# Attributes a newer opset added that only act on exotic types (their documentation says so):
# a node that leaves them unset means the same at opset 23.
EXOTIC_ONLY_ATTRS = {"Cast": {"round_mode"}, "CastLike": {"round_mode"}}


def type_only_bump(op, opset, node_attrs=()):
    """The opset-<=MAX_OPSET schema when `op`'s schema at `opset` has the same inputs, outputs
    and attributes and differs from it only by added exotic element types (bfloat16, float8,
    float4, int4/int2: most opset 24-25 bumps, e.g. Reshape-24); else None."""
    new = onnx.defs.get_schema(op, opset, "")
    try:
        old = onnx.defs.get_schema(op, MAX_OPSET, "")
    except onnx.defs.SchemaError:
        return None
    ignore = EXOTIC_ONLY_ATTRS.get(op, set()) - set(node_attrs)
    if _form(new, ignore) != _form(old):
        return None
    tn, to = _types(new), _types(old)
    if set(tn) != set(to):
        return None
    added = set()
    for k in to:
        if not to[k] <= tn[k]:
            return None  # types removed: not a pure addition
        added |= tn[k] - to[k]
    if not added or not all(EXOTIC_TYPES.search(t) for t in added):
        return None  # nothing added means the bump changed semantics (Mod-28)
    return old


def prepare_model(model, known_ops, kernel_ops, skip_kernel_check):
    """Checks types, domains, opsets and kernels; returns (model rewritten to opset <= MAX_OPSET,
    op types). Raises Unsupported."""
    g = model.graph
    ops = sorted({n.op_type for n in g.node})
    for vi in g.input:
        _check_type(vi.type, f"graph input '{vi.name}'")
    for vi in g.output:
        _check_type(vi.type, f"graph output '{vi.name}'")
    nodes = list(_all_nodes(g))
    used_domains = {n.domain or "" for n in nodes}
    used_domains = {"" if d == "ai.onnx" else d for d in used_domains}
    for d in sorted(used_domains - {""}):
        what = "a training op" if d == "ai.onnx.preview.training" else "an op"
        ops_in = sorted({n.op_type for n in nodes if n.domain == d})
        raise Unsupported("other", f"{what} of domain {d} ({', '.join(ops_in)})")
    opset = None
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            opset = o.version
    if opset is None:
        raise Unsupported("other", "no ai.onnx opset_import")
    if opset < MIN_OPSET:
        raise Unsupported("opset", f"declares ai.onnx opset {opset} (dtc takes {MIN_OPSET}+)")
    for n in nodes:
        try:
            since = onnx.defs.get_schema(n.op_type, opset, "").since_version
        except onnx.defs.SchemaError:
            raise Unsupported("other", f"onnx has no schema for {n.op_type} at opset {opset}")
        if since > MAX_OPSET and not type_only_bump(n.op_type, opset,
                                                    [a.name for a in n.attribute]):
            raise Unsupported("opset", f"needs opset {since} form of {n.op_type}")
    flow = sorted({n.op_type for n in nodes
                   if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                          for a in n.attribute)})
    if flow:
        raise Unsupported("other", f"control flow with a graph body ({', '.join(flow)}): dtc "
                          "takes graphs without If/Loop/Scan")
    if not skip_kernel_check:
        unknown = sorted({n.op_type for n in nodes} - known_ops - COMPILE_TIME_OPS)
        if unknown:
            raise Unsupported("kernel", f"dtc does not know op {', '.join(unknown)}")
        missing = sorted({n.op_type for n in nodes} - kernel_ops - COMPILE_TIME_OPS)
        if missing:
            raise Unsupported("kernel", f"no CPU kernel for {', '.join(missing)}")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.opset_import[:]
    m.opset_import.add(domain="", version=min(opset, MAX_OPSET))
    return m, ops


STATIC_SHAPE_ERROR = re.compile(r"value '([^']+)' has type .*the plan needs a known dtype and "
                                r"static shape")


def onnx_infers_static(model, value):
    """Whether ONNX's own shape inference (with data propagation) finds a static shape for
    `value`; when it does not either, the shape depends on input values (dtc plans are static)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:
        return False
    g = inferred.graph
    for vi in list(g.value_info) + list(g.output) + list(g.input):
        if vi.name == value:
            t = vi.type.tensor_type
            return t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim)
    return False


def classify_compile_error(text, model=None):
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    errs = [l for l in lines if l.startswith("error")] or lines or ["(no message)"]
    first = errs[0].split("; supported operators:")[0]
    m = STATIC_SHAPE_ERROR.search(text)
    if m and model is not None and not onnx_infers_static(model, m.group(1)):
        return "unsupported", "other", "data-dependent shape: " + first
    if any(p in text for p in UNSUPPORTED_PATTERNS):
        low = text.lower()
        if "no cpu kernel" in low or "unknown operator" in low or "unsupported operator" in low:
            cat = "kernel"
        elif "dtype" in low or "element type" in low:
            cat = "dtype"
        else:
            cat = "other"
        return "unsupported", cat, first
    return "failed", None, first


# --- running one case -------------------------------------------------------------------------
def run_tool(argv, cwd):
    """Runs a tool; retries a few times when its binary is being relinked."""
    for attempt in range(6):
        try:
            p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None, f"timed out after {TIMEOUT_S} s"
        except OSError as e:  # ETXTBSY / ENOENT while the lead relinks
            if attempt == 5:
                return None, f"cannot start {argv[0]}: {e}"
            time.sleep(2)
            continue
        return p, None


def compare(name, got, want, rtol, atol):
    """Returns None when equal enough, else a one-line reason."""
    if got.dtype != want.dtype:
        return f"output '{name}': dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"output '{name}': shape {got.shape}, expected {want.shape}"
    if got.size == 0:
        return None
    if want.dtype.kind in "biu":
        bad = got != want
        if bad.any():
            i = np.unravel_index(np.argmax(bad), want.shape)
            return (f"output '{name}': {int(bad.sum())} of {want.size} elements differ, "
                    f"first at {tuple(int(k) for k in i)}: {got[i]} vs {want[i]}")
        return None
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return None
    with np.errstate(invalid="ignore"):
        err = np.abs(g - w)
    finite = np.where(np.isnan(err), np.inf, err)
    i = np.unravel_index(np.argmax(np.where(ok, -1.0, finite)), want.shape)
    return (f"output '{name}': {int((~ok).sum())} of {want.size} elements off, max abs error "
            f"{float(np.max(np.where(ok, 0, finite))):.3g} (at {tuple(int(k) for k in i)}: "
            f"{got[i]} vs {want[i]}; rtol {rtol:g}, atol {atol:g})")


def run_case(name, entry, cache_dir, build, known_ops, kernel_ops, skip_kernel_check):
    res = {"name": name, "ops": [], "status": "unsupported", "category": None, "reason": ""}
    case_dir = os.path.join(cache_dir, name)
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    res["ops"] = sorted({n.op_type for n in model.graph.node})
    try:
        model, _ = prepare_model(model, known_ops, kernel_ops, skip_kernel_check)
        if entry.get("data_error"):
            raise Unsupported("other", "test data not serializable: " + entry["data_error"])
    except Unsupported as u:
        res["category"], res["reason"] = u.category, u.reason
        return res
    g = model.graph
    inputs = [vi for vi in g.input]
    with tempfile.TemporaryDirectory(prefix="dtc-conf-") as tmp:
        model_path = os.path.join(tmp, "model.onnx")
        onnx.save(model, model_path)
        for k in range(entry["data_sets"]):
            ds = os.path.join(case_dir, f"test_data_set_{k}")
            feeds = {vi.name: read_tensor(os.path.join(ds, f"input_{j}.pb"))
                     for j, vi in enumerate(inputs)}
            wants = [read_tensor(os.path.join(ds, f"output_{j}.pb")) for j in range(len(g.output))]
            dims = []
            for vi in inputs:
                for axis, d in enumerate(vi.type.tensor_type.shape.dim):
                    if d.HasField("dim_param") and d.dim_param:
                        dims += ["--dim", f"{d.dim_param}={feeds[vi.name].shape[axis]}"]
            plan = os.path.join(tmp, f"plan{k}.dtc")
            if k == 0 or dims:
                p, err = run_tool([os.path.join(build, "tools", "dtc-compile"), model_path,
                                   "--inference", "-o", plan] + dims, tmp)
                if err:
                    res.update(status="failed", reason="dtc-compile " + err)
                    return res
                if p.returncode != 0:
                    status, cat, line = classify_compile_error(p.stderr + p.stdout, model)
                    res.update(status=status, category=cat, reason=line)
                    return res
            elif k > 0:
                shutil.copy(os.path.join(tmp, "plan0.dtc"), plan)
            in_npz = os.path.join(tmp, "in.npz")
            out_npz = os.path.join(tmp, "out.npz")
            np.savez(in_npz, **feeds)
            p, err = run_tool([os.path.join(build, "tools", "dtc-run"), plan, "--infer",
                               "--inputs", in_npz, "--outputs", out_npz, "--threads", "1"], tmp)
            if err:
                res.update(status="failed", reason="dtc-run " + err)
                return res
            if p.returncode != 0:
                lines = [l for l in (p.stderr + p.stdout).splitlines() if l.strip()]
                errs = [l for l in lines if l.startswith("error")] or lines or ["(no message)"]
                res.update(status="failed", reason=f"dtc-run exit {p.returncode}: {errs[0]}")
                return res
            with np.load(out_npz) as got:
                for vi, want in zip(g.output, wants):
                    if vi.name not in got:
                        res.update(status="failed", reason=f"output '{vi.name}' missing")
                        return res
                    why = compare(vi.name, got[vi.name], want, entry["rtol"], entry["atol"])
                    if why:
                        res.update(status="failed", reason=why)
                        return res
    res.update(status="passed", reason="")
    return res


# --- main -------------------------------------------------------------------------------------
def read_expected_failures(path):
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            out[name] = reason.strip()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="build directory holding tools/dtc-compile and tools/dtc-run")
    ap.add_argument("--cache", default=None, help="case cache (default: BUILD/conformance-cache)")
    ap.add_argument("--filter", default=None, help="regex on case names (re.search)")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once")
    ap.add_argument("--json", default=None, help="write every case's result here")
    ap.add_argument("--verbose", action="store_true", help="print the per-op table")
    ap.add_argument("--no-skip", action="store_true",
                    help="compile cases whose ops lack CPU kernels too (dtc classifies them)")
    ap.add_argument("--expected-failures", default=os.path.join(HERE, "expected_failures.txt"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    cache_root = args.cache or os.path.join(build, "conformance-cache")

    t0 = time.time()
    cache_dir, index, gen_s = load_index(cache_root)
    names = sorted(n for n in index if not args.filter or re.search(args.filter, n))
    known_ops, kernel_ops = read_op_lists()
    expected = read_expected_failures(args.expected_failures)

    t1 = time.time()
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = [pool.submit(run_case, n, index[n], cache_dir, build, known_ops, kernel_ops,
                            args.no_skip) for n in names]
        for fut in futs:
            try:
                results.append(fut.result())
            except Exception as e:  # a bug in this script or an unreadable case
                n = names[len(results)]
                results.append({"name": n, "ops": [], "status": "failed", "category": None,
                                "reason": f"runner error: {type(e).__name__}: {e}"})
    run_s = time.time() - t1

    counts = collections.Counter(r["status"] for r in results)
    cats = collections.Counter(r["category"] for r in results if r["status"] == "unsupported")
    failed = [r for r in results if r["status"] == "failed"]
    unexpected = [r for r in failed if r["name"] not in expected]
    now_pass = sorted(r["name"] for r in results
                      if r["name"] in expected and r["status"] == "passed")

    if args.verbose:
        table = collections.defaultdict(collections.Counter)
        for r in results:
            for op in r["ops"]:
                table[op][r["status"]] += 1
        print(f"{'op':<36}{'passed':>8}{'failed':>8}{'unsupp':>8}")
        for op in sorted(table):
            c = table[op]
            print(f"{op:<36}{c['passed']:>8}{c['failed']:>8}{c['unsupported']:>8}")
        print()
        reasons = collections.Counter(r["reason"] for r in results
                                      if r["status"] == "unsupported")
        print("unsupported reasons (most common):")
        for reason, n in reasons.most_common(25):
            print(f"  {n:5d}  {reason}")
        print()
    if failed:
        print("failed cases:")
        for r in failed:
            mark = " (expected)" if r["name"] in expected else ""
            print(f"  {r['name']}{mark}: {r['reason']}")
    if now_pass:
        print("expected failures that now pass (remove them from expected_failures.txt):")
        for n in now_pass:
            print(f"  {n}")
    print(f"conformance: {len(results)} cases: {counts['passed']} passed, {counts['failed']} "
          f"failed ({len(unexpected)} unexpected), {counts['unsupported']} unsupported ("
          + ", ".join(f"{c} {cats[c]}" for c in CATEGORIES) + ")")
    print(f"time: {gen_s:.1f} s generating cases, {t1 - t0 - gen_s:.1f} s loading, "
          f"{run_s:.1f} s running (jobs={args.jobs})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"onnx": onnx.__version__, "counts": dict(counts),
                       "unsupported_by_category": {c: cats[c] for c in CATEGORIES},
                       "results": results}, f, indent=1)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
