// Transpose: permutes the axes by `perm` (default: reversed). Opset 1; 13 and 21 only widen the
// types. A perm that is not a permutation of [0, rank) is an error naming the node.
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

#include <numeric>

namespace dtc::ops {
namespace {

Expected<std::vector<int64_t>> permutation(const ir::Node &node, size_t rank) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.rbegin(), perm.rend(), int64_t{0});
  if (!node.hasAttr("perm"))
    return perm;
  perm = node.attrInts("perm");
  std::vector<bool> seen(rank, false);
  bool ok = perm.size() == rank;
  for (int64_t p : perm) {
    if (!ok || p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) {
      ok = false;
      break;
    }
    seen[p] = true;
  }
  if (!ok)
    return Status::error(node.where(), "perm " + intsText(perm) +
                                           " is not a permutation of the axes of a rank-" +
                                           std::to_string(rank) + " input");
  return perm;
}

} // namespace

namespace {

/// A split axis moves with the permutation.
Status transposeSharding(ShardingContext &ctx) {
  const ir::Sharding &s = ctx.input(0);
  if (!s.isSplit())
    return Status::ok();
  std::vector<int64_t> perm = ctx.node().attrInts("perm");
  const int64_t rank = static_cast<int64_t>(ctx.inputDims(0).size());
  if (perm.empty())
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  for (size_t k = 0; k < perm.size(); ++k)
    if (perm[k] == s.axis) {
      ctx.require(0, s);
      ctx.setOutput(0, ir::Sharding::split(static_cast<int64_t>(k), s.parts, s.blocks));
    }
  return Status::ok();
}

} // namespace

OpDef defineTranspose() {
  OpDef d;
  d.name = "Transpose";
  d.version(1)
      .in("data", "T")
      .out("transposed", "T")
      .attr("perm", ir::AttrKind::kInts)
      .type("T", kAllTypes);
  d.version(13);
  d.infer = [](InferenceContext &ctx) -> Status {
    const ir::Shape &in = ctx.inputShape(0);
    if (!in.hasRank()) {
      if (ctx.node().hasAttr("perm"))
        ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>(ctx.node().attrInts("perm").size(),
                                                             ir::Dim::unknown())));
      return Status::ok();
    }
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, permutation(ctx.node(), in.rank()));
    std::vector<ir::Dim> dims;
    for (int64_t p : perm)
      dims.push_back(in[p]);
    ctx.setOutputShape(0, ir::Shape(std::move(dims)));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &data = *ctx.input(0);
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, permutation(ctx.node(), data.dims().size()));
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         transposeElements(ctx.node().output(0)->name(), data, data.dims(), perm,
                                           ctx.node().where()));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // dX = Transpose(dY) with the inverse permutation: dX's axis perm[i] is dY's axis i.
  d.gradient = [](GradientContext &ctx) -> Status {
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> perm,
                         permutation(ctx.node(), ctx.input(0)->shape().rank()));
    std::vector<int64_t> inv(perm.size());
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) {
      inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      identity = identity && perm[i] == static_cast<int64_t>(i);
    }
    ir::Value *dx = ctx.outputGrad(0);
    if (!identity) {
      DTC_ASSIGN_OR_RETURN(dx, ctx.emit1("Transpose", {dx}, {{"perm", ir::Attribute(inv)}}));
    }
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = transposeSharding;
  return d;
}

} // namespace dtc::ops
