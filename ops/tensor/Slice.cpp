// Slice: takes starts[i]:ends[i]:steps[i] along axes[i]. Forms: starts/ends/axes attributes
// (1), inputs data, starts, ends, optional axes and steps (10, canonical; 11 negative axes; 13
// types). Clamping follows the spec (INT64_MAX / INT64_MIN mean "to the end"); a symbolic dim
// stays exact only when the slice takes all of it. Propagates slices of 1-D shape values.
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

#include <climits>

namespace dtc::ops {
namespace {

struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};

/// Checks lengths, fills default axes/steps, normalizes axes.
Expected<SliceParams> completeParams(std::vector<int64_t> starts, std::vector<int64_t> ends,
                                     std::optional<std::vector<int64_t>> axes,
                                     std::optional<std::vector<int64_t>> steps, int64_t rank,
                                     const std::string &where) {
  SliceParams p;
  size_t n = starts.size();
  if (ends.size() != n)
    return Status::error(where, "starts " + intsText(starts) + " and ends " + intsText(ends) +
                                    " differ in length");
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < n; ++i)
      axes->push_back(static_cast<int64_t>(i));
  }
  if (!steps)
    steps = std::vector<int64_t>(n, 1);
  if (axes->size() != n)
    return Status::error(where, "axes " + intsText(*axes) + " and starts " + intsText(starts) +
                                    " differ in length");
  if (steps->size() != n)
    return Status::error(where, "steps " + intsText(*steps) + " and starts " + intsText(starts) +
                                    " differ in length");
  for (int64_t s : *steps)
    if (s == 0)
      return Status::error(where, "slice step must not be 0");
  DTC_ASSIGN_OR_RETURN(p.axes, normalizeAxes(*axes, rank, where, "axes"));
  p.starts = std::move(starts);
  p.ends = std::move(ends);
  p.steps = std::move(*steps);
  return p;
}

/// True when the slice takes a whole axis of any size in order (or reversed, step -1).
bool takesWholeAxis(int64_t start, int64_t end, int64_t step) {
  if (step == 1)
    return start == 0 && end == INT64_MAX;
  if (step == -1)
    return (start == -1 || start == INT64_MAX) && end <= -INT64_MAX;
  return false;
}

} // namespace

namespace {

/// A split passes through when the slice leaves the split axis whole.
Status sliceSharding(ShardingContext &ctx) {
  const ir::Sharding &s = ctx.input(0);
  if (!s.isSplit())
    return Status::ok();
  const int64_t rank = static_cast<int64_t>(ctx.inputDims(0).size());
  std::optional<std::vector<int64_t>> starts = ctx.constantInts(1);
  if (!starts)
    return Status::ok();
  std::vector<int64_t> axes;
  if (ctx.numInputs() > 3 && ctx.hasInput(3)) {
    std::optional<std::vector<int64_t>> a = ctx.constantInts(3);
    if (!a)
      return Status::ok();
    axes = *a;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  }
  for (int64_t a : axes)
    if ((a < 0 ? a + rank : a) == s.axis && ctx.inputDims(0)[static_cast<size_t>(s.axis)] !=
                                                ctx.outputDims(0)[static_cast<size_t>(s.axis)])
      return Status::ok();
  // Sliced only along other axes (or not at all along the split one): a whole-axis slice with
  // step 1 is the identity there, which holds for the local shard too only with step 1.
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (a != s.axis)
      continue;
    std::optional<std::vector<int64_t>> steps;
    if (ctx.numInputs() > 4 && ctx.hasInput(4))
      steps = ctx.constantInts(4);
    if (steps && k < steps->size() && (*steps)[k] != 1)
      return Status::ok();
    // The ends may name the global size; the local slice must then be whole too: replace
    // them by INT64_MAX-like bounds only if they are not already.
    std::optional<std::vector<int64_t>> ends = ctx.constantInts(2);
    if (!ends || (*starts)[k] != 0 || (*ends)[k] < ctx.inputDims(0)[static_cast<size_t>(s.axis)])
      return Status::ok();
  }
  ctx.require(0, s);
  ctx.setOutput(0, s);
  return Status::ok();
}

} // namespace

OpDef defineSlice() {
  OpDef d;
  d.name = "Slice";
  d.version(1)
      .in("data", "T")
      .out("output", "T")
      .attr("starts", ir::AttrKind::kInts, true)
      .attr("ends", ir::AttrKind::kInts, true)
      .attr("axes", ir::AttrKind::kInts)
      .type("T", kAllTypes);
  OpVersion &v10 = d.version(10);
  v10.attrs.clear();
  v10.in("starts", "Tind")
      .in("ends", "Tind")
      .optIn("axes", "Tind")
      .optIn("steps", "Tind")
      .type("Tind", kInt32Or64Types);
  d.version(11);
  d.version(13);
  d.normalize = [](ir::Node &node, NormalizeContext &ctx) -> Status {
    if (ctx.opset() >= 10)
      return Status::ok();
    DTC_RETURN_IF_ERROR(rejectNegativeAttrBefore11(node, ctx.opset(), "axes"));
    ctx.attrToInput(node, "starts", 1);
    ctx.attrToInput(node, "ends", 2);
    ctx.attrToInput(node, "axes", 3);
    return Status::ok();
  };
  d.infer = [](InferenceContext &ctx) -> Status {
    const std::string where = ctx.node().where();
    for (size_t i = 1; i < ctx.numInputs() && i < 5; ++i)
      if (ctx.hasInput(i) && ctx.inputShape(i).hasRank() && ctx.inputShape(i).rank() != 1)
        return ctx.error("input " + std::to_string(i) + " must be 1-D, got shape " +
                         ctx.inputShape(i).str());
    const ir::Shape &in = ctx.inputShape(0);
    if (!in.hasRank())
      return Status::ok();
    int64_t rank = static_cast<int64_t>(in.rank());
    std::optional<std::vector<int64_t>> starts = staticInts(ctx, 1), ends = staticInts(ctx, 2);
    std::optional<std::vector<int64_t>> axes, steps;
    bool known = starts && ends;
    if (ctx.hasInput(3))
      known = (axes = staticInts(ctx, 3)).has_value() && known;
    if (ctx.hasInput(4))
      known = (steps = staticInts(ctx, 4)).has_value() && known;
    if (!known) {
      // Rank is kept; dims on the sliced axes (all of them when axes are unknown) are unknown.
      std::vector<ir::Dim> dims(in.rank(), ir::Dim::unknown());
      if (axes && (!ctx.hasInput(4) || steps)) {
        dims = in.dims();
        DTC_ASSIGN_OR_RETURN(std::vector<int64_t> norm, normalizeAxes(*axes, rank, where, "axes"));
        // x[0:T] with a symbolic end T (GPT's causal mask sliced to the sequence length):
        // the result has T elements, assuming T does not exceed the dim (as at run time).
        const std::vector<ir::Dim> *sv = ctx.shapeValue(1), *ev = ctx.shapeValue(2);
        const std::vector<ir::Dim> *stv = ctx.hasInput(4) ? ctx.shapeValue(4) : nullptr;
        for (size_t i = 0; i < norm.size(); ++i) {
          int64_t a = norm[i];
          dims[a] = ir::Dim::unknown();
          if (sv && ev && sv->size() == norm.size() && ev->size() == norm.size() &&
              (*sv)[i] == ir::Dim::fixed(0) && (*ev)[i].isSymbolic() &&
              (!ctx.hasInput(4) ||
               (stv && stv->size() == norm.size() && (*stv)[i] == ir::Dim::fixed(1))))
            dims[a] = (*ev)[i];
        }
      }
      ctx.setOutputShape(0, ir::Shape(std::move(dims)));
      return Status::ok();
    }
    DTC_ASSIGN_OR_RETURN(SliceParams p, completeParams(*starts, *ends, axes, steps, rank, where));
    std::vector<ir::Dim> dims = in.dims();
    std::vector<SliceRange> ranges(p.axes.size());
    for (size_t i = 0; i < p.axes.size(); ++i) {
      const ir::Dim &dim = in[p.axes[i]];
      if (dim.isStatic()) {
        DTC_ASSIGN_OR_RETURN(ranges[i],
                             sliceRange(dim.value(), p.starts[i], p.ends[i], p.steps[i], where));
        dims[p.axes[i]] = ir::Dim::fixed(ranges[i].count);
      } else if (!takesWholeAxis(p.starts[i], p.ends[i], p.steps[i])) {
        dims[p.axes[i]] = ir::Dim::unknown();
      }
    }
    // Data propagation: slice of a 1-D shape value.
    if (rank == 1 && in[0].isStatic())
      if (const std::vector<ir::Dim> *value = ctx.shapeValue(0);
          value && static_cast<int64_t>(value->size()) == in[0].value()) {
        std::vector<ir::Dim> out;
        int64_t step = p.axes.empty() ? 1 : p.steps[0];
        int64_t start = p.axes.empty() ? 0 : ranges[0].start;
        int64_t count = p.axes.empty() ? in[0].value() : ranges[0].count;
        for (int64_t k = 0; k < count; ++k)
          out.push_back((*value)[start + k * step]);
        ctx.setShapeValue(0, std::move(out));
      }
    ctx.setOutputShape(0, ir::Shape(std::move(dims)));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    const ir::TensorData &data = *ctx.input(0);
    const std::vector<int64_t> &inDims = data.dims();
    int64_t rank = static_cast<int64_t>(inDims.size());
    auto ints = [&](size_t i) -> Expected<std::optional<std::vector<int64_t>>> {
      if (i >= ctx.numInputs() || !ctx.input(i))
        return std::optional<std::vector<int64_t>>();
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> v, ctx.input(i)->toInt64s());
      return std::optional<std::vector<int64_t>>(std::move(v));
    };
    DTC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> starts, ints(1));
    DTC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> ends, ints(2));
    DTC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ints(3));
    DTC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> steps, ints(4));
    if (!starts || !ends)
      return ctx.error("starts and ends are required");
    DTC_ASSIGN_OR_RETURN(SliceParams p, completeParams(*starts, *ends, axes, steps, rank, where));
    std::vector<int64_t> first(rank, 0), step(rank, 1), outDims = inDims;
    for (size_t i = 0; i < p.axes.size(); ++i) {
      DTC_ASSIGN_OR_RETURN(
          SliceRange r, sliceRange(inDims[p.axes[i]], p.starts[i], p.ends[i], p.steps[i], where));
      first[p.axes[i]] = r.start;
      step[p.axes[i]] = p.steps[i];
      outDims[p.axes[i]] = r.count;
    }
    std::vector<int64_t> inStrides = rowMajorStrides(inDims);
    auto src = [&](int64_t k) {
      int64_t s = 0;
      for (int64_t a = rank; a-- > 0;) {
        s += (first[a] + (k % outDims[a]) * step[a]) * inStrides[a];
        k /= outDims[a];
      }
      return s;
    };
    // Step 1 on the last axis: each output row is a contiguous run of the input (GPT-2's causal
    // mask, a 1 MiB Slice per layer, is copied row by row instead of element by element).
    const int64_t row = rank > 0 ? outDims[rank - 1] : 0;
    std::optional<int64_t> count = ir::checkedProduct(outDims);
    if (row > 1 && step[rank - 1] == 1 && count && *count > 0) {
      DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                           remapRuns(
                               ctx.node().output(0)->name(), data, outDims, row,
                               [&](int64_t k) { return src(k * row); }, where));
      return std::vector<ir::TensorDataPtr>{t};
    }
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         remapElements(ctx.node().output(0)->name(), data, outDims, src, where));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX: dY put back where the slice took it, zeros elsewhere. Per axis the first index and
  // count come from the same clamping as inference (sliceRange / clampSlice). All steps 1:
  // Pad(dY) with pads (first, dim - first - count); otherwise ai.dtc.SliceGrad(dY) with the
  // resolved per-axis starts and steps (ops/training/TensorGradSlice.cpp). Bounds must be
  // constant.
  d.gradient = [](GradientContext &ctx) -> Status {
    const ir::Node &n = ctx.node();
    const std::vector<int64_t> dims = ctx.input(0)->shape().staticSizes();
    const int64_t rank = static_cast<int64_t>(dims.size());
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> starts, gradConstantInts(ctx, 1, "starts"));
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> ends, gradConstantInts(ctx, 2, "ends"));
    std::optional<std::vector<int64_t>> axes, steps;
    if (n.input(3)) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> a, gradConstantInts(ctx, 3, "axes"));
      axes = std::move(a);
    }
    if (n.input(4)) {
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> s, gradConstantInts(ctx, 4, "steps"));
      steps = std::move(s);
    }
    DTC_ASSIGN_OR_RETURN(SliceParams p, completeParams(starts, ends, axes, steps, rank, n.where()));
    std::vector<int64_t> first(dims.size(), 0), step(dims.size(), 1), count = dims;
    bool unitSteps = true;
    for (size_t i = 0; i < p.axes.size(); ++i) {
      const size_t a = static_cast<size_t>(p.axes[i]);
      DTC_ASSIGN_OR_RETURN(SliceRange r,
                           sliceRange(dims[a], p.starts[i], p.ends[i], p.steps[i], n.where()));
      first[a] = r.count > 0 ? r.start : 0;
      step[a] = p.steps[i];
      count[a] = r.count;
      unitSteps = unitSteps && (p.steps[i] == 1 || r.count <= 1);
    }
    ir::Value *dx = nullptr;
    if (unitSteps) {
      std::vector<int64_t> pads(2 * dims.size());
      bool any = false;
      for (size_t a = 0; a < dims.size(); ++a) {
        pads[a] = first[a];
        pads[a + dims.size()] = dims[a] - first[a] - count[a];
        any = any || pads[a] != 0 || pads[a + dims.size()] != 0;
      }
      dx = ctx.outputGrad(0);
      if (any) {
        DTC_ASSIGN_OR_RETURN(dx, ctx.emit1("Pad", {dx, ctx.constantI64s(pads)},
                                           {{"mode", ir::Attribute("constant")}}));
      }
    } else {
      DTC_ASSIGN_OR_RETURN(dx, ctx.emit1("SliceGrad", {ctx.outputGrad(0)},
                                         {{"shape", ir::Attribute(dims)},
                                          {"starts", ir::Attribute(first)},
                                          {"steps", ir::Attribute(step)}},
                                         "ai.dtc"));
    }
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = sliceSharding;
  return d;
}

} // namespace dtc::ops
