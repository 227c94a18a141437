#include "ops/Sharding.h"

#include <algorithm>

namespace dtc::ops {

using ir::Sharding;

ShardingContext::ShardingContext(const ir::Node &node, std::vector<Sharding> inputs,
                                 std::vector<bool> freeWeights,
                                 std::vector<std::vector<int64_t>> inputDims,
                                 std::vector<std::vector<int64_t>> outputDims, int64_t parts,
                                 LookAhead lookAhead)
    : node_(node), inputs_(std::move(inputs)), freeWeights_(std::move(freeWeights)),
      inputDims_(std::move(inputDims)), outputDims_(std::move(outputDims)), parts_(parts),
      lookAhead_(std::move(lookAhead)), required_(inputs_.size()), copy_(inputs_.size()),
      outputs_(outputDims_.size()) {}

std::optional<std::vector<int64_t>> ShardingContext::constantInts(size_t i) const {
  const ir::Value *v = node_.input(i);
  if (!v || !v->isConstant() || !v->initializer())
    return std::nullopt;
  auto ints = v->initializer()->toInt64s();
  if (!ints.hasValue())
    return std::nullopt;
  return *ints;
}

void ShardingContext::require(size_t i, const Sharding &s) { required_.at(i) = s; }

void ShardingContext::requireReplicatedCopy(size_t i) {
  required_.at(i) = Sharding::replicated();
  copy_.at(i) = true;
}

void ShardingContext::setOutput(size_t j, const Sharding &s) { outputs_.at(j) = s; }

bool ShardingContext::keepsSplit(size_t j, const Sharding &s) const {
  const ir::Value *v = node_.output(j);
  return v && lookAhead_ && lookAhead_(v, s);
}

void ShardingContext::replaceConstant(size_t i, std::vector<int64_t> values) {
  constants_.emplace_back(i, std::move(values));
}

std::optional<Sharding> columnSplit(const ShardingContext &ctx, size_t out, int64_t axis,
                                    int64_t size) {
  for (int64_t blocks : {1, 2, 3, 4}) {
    if (size % (ctx.parts() * blocks) != 0)
      continue;
    const Sharding s = Sharding::split(axis, ctx.parts(), blocks);
    if (ctx.keepsSplit(out, s))
      return s;
  }
  // Uneven (ir::splitRange: the first size % T ranks get one more), when no rank is left empty.
  if (size % ctx.parts() != 0 && size >= ctx.parts()) {
    const Sharding s = Sharding::split(axis, ctx.parts());
    if (ctx.keepsSplit(out, s))
      return s;
  }
  return std::nullopt;
}

ShardFn unarySharding() {
  return [](ShardingContext &ctx) {
    const Sharding &s = ctx.input(0);
    if (!s.isSplit())
      return Status::ok();
    ctx.require(0, s);
    for (size_t j = 0; j < ctx.numOutputs(); ++j)
      ctx.setOutput(j, s);
    return Status::ok();
  };
}

ShardFn replicatedSharding() {
  return [](ShardingContext &) { return Status::ok(); };
}

ShardFn elementwiseSharding() {
  return [](ShardingContext &ctx) {
    const size_t rank = ctx.outputDims(0).size();
    // The lead: the first input split along an axis the output has.
    int lead = -1;
    int64_t outAxis = -1;
    for (size_t i = 0; i < ctx.numInputs() && lead < 0; ++i) {
      if (!ctx.hasInput(i) || !ctx.input(i).isSplit())
        continue;
      const int64_t shift = static_cast<int64_t>(rank - ctx.inputDims(i).size());
      lead = static_cast<int>(i);
      outAxis = ctx.input(i).axis + shift;
    }
    if (lead < 0)
      return Status::ok(); // all replicated (partial inputs are all-reduced first)
    const Sharding &s = ctx.input(static_cast<size_t>(lead));
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      if (!ctx.hasInput(i))
        continue;
      const std::vector<int64_t> &dims = ctx.inputDims(i);
      const int64_t axis = outAxis - static_cast<int64_t>(rank - dims.size());
      if (axis < 0 || dims[static_cast<size_t>(axis)] == 1)
        ctx.require(i, Sharding::replicated()); // broadcast along the split axis
      else
        ctx.require(i, Sharding::split(axis, s.parts, s.blocks));
    }
    for (size_t j = 0; j < ctx.numOutputs(); ++j)
      ctx.setOutput(j, Sharding::split(outAxis, s.parts, s.blocks));
    return Status::ok();
  };
}

ShardFn independentAxesSharding(std::function<std::vector<int64_t>(const ShardingContext &)> axesOf,
                                bool removesAxes, int64_t paramAxis) {
  return [axesOf = std::move(axesOf), removesAxes, paramAxis](ShardingContext &ctx) {
    const Sharding &s = ctx.input(0);
    if (!s.isSplit())
      return Status::ok();
    const std::vector<int64_t> axes = axesOf(ctx);
    if (std::find(axes.begin(), axes.end(), s.axis) != axes.end())
      return Status::ok(); // the op mixes the split axis: gather first
    int64_t outAxis = s.axis;
    if (removesAxes)
      outAxis -= std::count_if(axes.begin(), axes.end(), [&](int64_t a) { return a < s.axis; });
    const bool params = paramAxis >= 0 && s.axis == paramAxis;
    if (paramAxis >= 0 && !params)
      return Status::ok();
    // Every output keeps the split if it has the axis at full size (extra outputs such as
    // LayerNormalization's mean have size 1 on the normalized axes only).
    const std::vector<int64_t> &out0 = ctx.outputDims(0);
    for (size_t j = 1; j < ctx.numOutputs() && !params; ++j) {
      if (!ctx.node().output(j))
        continue;
      const std::vector<int64_t> &d = ctx.outputDims(j);
      if (d.size() != out0.size() || d[static_cast<size_t>(outAxis)] != out0[outAxis])
        return Status::ok();
    }
    ctx.require(0, s);
    for (size_t i = 1; i < ctx.numInputs(); ++i)
      if (ctx.hasInput(i) && params)
        ctx.require(i, Sharding::split(0, s.parts, s.blocks));
    ctx.setOutput(0, Sharding::split(outAxis, s.parts, s.blocks));
    for (size_t j = 1; j < ctx.numOutputs(); ++j)
      ctx.setOutput(j, params ? Sharding::split(0, s.parts, s.blocks)
                              : Sharding::split(outAxis, s.parts, s.blocks));
    return Status::ok();
  };
}

int64_t reshapeSplitAxis(const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                         int64_t axis, int64_t parts, int64_t blocks) {
  if (axis < 0 || axis >= static_cast<int64_t>(in.size()))
    return -1;
  int64_t pre = 1;
  for (int64_t d = 0; d < axis; ++d)
    pre *= in[d];
  int64_t prefix = 1;
  for (size_t j = 0; j < out.size(); ++j) {
    if (prefix == pre && out[j] > 1)
      return out[j] % (parts * blocks) == 0 ? static_cast<int64_t>(j) : -1;
    prefix *= out[j];
    if (prefix > pre)
      return -1;
  }
  return -1;
}

ShardFn reshapeSharding(bool rewritesTarget) {
  return [rewritesTarget](ShardingContext &ctx) {
    const Sharding &s = ctx.input(0);
    if (!s.isSplit())
      return Status::ok();
    const std::vector<int64_t> &in = ctx.inputDims(0);
    const std::vector<int64_t> &out = ctx.outputDims(0);
    const int64_t k = reshapeSplitAxis(in, out, s.axis, s.parts, s.blocks);
    if (k < 0)
      return Status::ok();
    if (rewritesTarget) {
      std::optional<std::vector<int64_t>> target = ctx.constantInts(1);
      if (!target || target->size() != out.size())
        return Status::ok();
      std::vector<int64_t> local = *target;
      for (size_t j = 0; j < local.size(); ++j) {
        const bool copies = local[j] == 0 && !ctx.node().attrInt("allowzero", 0);
        if (static_cast<int64_t>(j) == k) {
          if (copies && k != s.axis)
            return Status::ok(); // would copy an unsplit input dim
          if (local[j] > 0)
            local[j] /= s.parts;
        } else if (copies && static_cast<int64_t>(j) == s.axis) {
          return Status::ok(); // would copy the local size of the split axis
        }
      }
      if (local != *target)
        ctx.replaceConstant(1, local);
      ctx.require(1, Sharding::replicated());
    }
    ctx.require(0, s);
    ctx.setOutput(0, Sharding::split(k, s.parts, s.blocks));
    return Status::ok();
  };
}

namespace {

int64_t rankOf(const ShardingContext &ctx) { return static_cast<int64_t>(ctx.inputDims(0).size()); }

int64_t normalized(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> r;
  for (int64_t a = from; a < to; ++a)
    r.push_back(a);
  return r;
}

} // namespace

ShardFn softmaxSharding() {
  return independentAxesSharding([](const ShardingContext &ctx) {
    return std::vector<int64_t>{normalized(ctx.node().attrInt("axis", -1), rankOf(ctx))};
  });
}

ShardFn layerNormSharding() {
  return independentAxesSharding([](const ShardingContext &ctx) {
    return range(normalized(ctx.node().attrInt("axis", -1), rankOf(ctx)), rankOf(ctx));
  });
}

ShardFn reduceSharding() {
  return [](ShardingContext &ctx) {
    const bool keep = ctx.node().attrInt("keepdims", 1) != 0;
    std::vector<int64_t> axes;
    if (ctx.numInputs() > 1 && ctx.hasInput(1)) {
      std::optional<std::vector<int64_t>> a = ctx.constantInts(1);
      if (!a)
        return Status::ok();
      for (int64_t x : *a)
        axes.push_back(normalized(x, rankOf(ctx)));
    }
    if (axes.empty()) {
      if (ctx.node().attrInt("noop_with_empty_axes", 0))
        return unarySharding()(ctx);
      axes = range(0, rankOf(ctx));
    }
    return independentAxesSharding([axes](const ShardingContext &) { return axes; }, !keep)(ctx);
  };
}

ShardFn argReduceSharding() {
  return [](ShardingContext &ctx) {
    const int64_t axis = normalized(ctx.node().attrInt("axis", 0), rankOf(ctx));
    return independentAxesSharding(
        [axis](const ShardingContext &) { return std::vector<int64_t>{axis}; },
        ctx.node().attrInt("keepdims", 1) == 0)(ctx);
  };
}

ShardFn cumSumSharding() {
  return [](ShardingContext &ctx) {
    std::optional<std::vector<int64_t>> a = ctx.constantInts(1);
    if (!a || a->size() != 1)
      return Status::ok();
    const int64_t axis = normalized((*a)[0], rankOf(ctx));
    return independentAxesSharding(
        [axis](const ShardingContext &) { return std::vector<int64_t>{axis}; })(ctx);
  };
}

ShardFn poolingSharding() {
  return independentAxesSharding([](const ShardingContext &ctx) { return range(2, rankOf(ctx)); });
}

ShardFn batchNormSharding() {
  return independentAxesSharding(
      [](const ShardingContext &ctx) {
        std::vector<int64_t> axes{0};
        for (int64_t a : range(2, rankOf(ctx)))
          axes.push_back(a);
        return axes;
      },
      false, 1);
}

} // namespace dtc::ops
