// The facets DepthToSpace and SpaceToDepth share (ops/tensor/TensorCommon.h): inference, folding
// and the gradient through the 6-D views of ops/tensor/SpaceDepthView.h.
#include "ops/tensor/SpaceDepthView.h"
#include "ops/tensor/TensorCommon.h"

#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

bool crdMode(const ir::Node &node) { return node.attrString("mode", "DCR") == "CRD"; }

/// The view of a node with static input dims `x` (rank 4, checked by inference).
SpaceDepthView viewOf(const ir::Node &node, const std::vector<int64_t> &x, bool depthToSpace) {
  const int64_t b = node.attrInt("blocksize", 1);
  return depthToSpace ? depthToSpaceView(x[0], x[1], x[2], x[3], b, crdMode(node))
                      : spaceToDepthView(x[0], x[1], x[2], x[3], b);
}

/// `d` divided by `k`: exact for a static or symbolic dim that `k` divides, an error for a
/// static one it does not, unknown otherwise.
Expected<ir::Dim> divideDim(InferenceContext &ctx, const ir::Dim &d, int64_t k,
                            const std::string &what) {
  if (d.isStatic() && d.value() % k != 0)
    return ctx.error(what + " " + std::to_string(d.value()) + " is not a multiple of " +
                     std::to_string(k));
  std::optional<ir::Dim> q = d.dividedBy(ir::Dim::fixed(k));
  return q ? *q : ir::Dim::unknown();
}

Status inferSpaceDepth(InferenceContext &ctx, bool depthToSpace) {
  const int64_t b = ctx.node().attrInt("blocksize", 0);
  if (b <= 0)
    return ctx.error("blocksize must be positive, got " + std::to_string(b));
  const std::string mode = ctx.node().attrString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    return ctx.error("mode must be \"DCR\" or \"CRD\", got \"" + mode + "\"");
  const ir::Shape &x = ctx.inputShape(0);
  if (!x.hasRank()) {
    ctx.setOutputShape(0, ir::Shape::unknownRank());
    return Status::ok();
  }
  if (x.rank() != 4)
    return ctx.error("input " + x.str() + " must have rank 4 (N, C, H, W)");
  const ir::Dim kb = ir::Dim::fixed(b);
  if (depthToSpace) {
    DTC_ASSIGN_OR_RETURN(ir::Dim c, divideDim(ctx, x[1], b * b, "channels"));
    ctx.setOutputShape(0, ir::Shape({x[0], c, x[2] * kb, x[3] * kb}));
  } else {
    DTC_ASSIGN_OR_RETURN(ir::Dim h, divideDim(ctx, x[2], b, "height"));
    DTC_ASSIGN_OR_RETURN(ir::Dim w, divideDim(ctx, x[3], b, "width"));
    ctx.setOutputShape(0, ir::Shape({x[0], x[1] * ir::Dim::fixed(b * b), h, w}));
  }
  return Status::ok();
}

} // namespace

void setSpaceDepthFacets(OpDef &d, bool depthToSpace) {
  d.infer = [depthToSpace](InferenceContext &ctx) { return inferSpaceDepth(ctx, depthToSpace); };
  d.fold = [depthToSpace](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &x = *ctx.input(0);
    if (x.dims().size() != 4)
      return ctx.error("input must have rank 4");
    const SpaceDepthView v = viewOf(ctx.node(), x.dims(), depthToSpace);
    const std::string name = ctx.node().output(0)->name();
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t,
                         transposeElements(name, x, v.dims, v.perm, ctx.node().where()));
    // The 6-D result is (n, c', h, b, w, b) for DepthToSpace, (n, b, b, c, h', w') for
    // SpaceToDepth.
    const std::vector<int64_t> &r = t->dims();
    const std::vector<int64_t> out =
        depthToSpace ? std::vector<int64_t>{r[0], r[1], r[2] * r[3], r[4] * r[5]}
                     : std::vector<int64_t>{r[0], r[1] * r[2] * r[3], r[4], r[5]};
    DTC_ASSIGN_OR_RETURN(t, withDims(name, *t, out, ctx.node().where()));
    return std::vector<ir::TensorDataPtr>{t};
  };
  d.gradient = [depthToSpace](GradientContext &ctx) -> Status {
    if (!ctx.needsGrad(0))
      return Status::ok();
    const std::vector<int64_t> x = ctx.input(0)->shape().staticSizes();
    const SpaceDepthView v = viewOf(ctx.node(), x, depthToSpace);
    std::vector<int64_t> permuted, inverse(v.perm.size());
    for (size_t i = 0; i < v.perm.size(); ++i) {
      permuted.push_back(v.dims[static_cast<size_t>(v.perm[i])]);
      inverse[static_cast<size_t>(v.perm[i])] = static_cast<int64_t>(i);
    }
    DTC_ASSIGN_OR_RETURN(ir::Value * dy6, ctx.reshapeTo(ctx.outputGrad(0), permuted));
    DTC_ASSIGN_OR_RETURN(ir::Value * dx6,
                         ctx.emit1("Transpose", {dy6}, {{"perm", ir::Attribute(inverse)}}));
    DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.reshapeTo(dx6, x));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  d.cost = dataMovementCost();
  // Channels and the spatial axes mix; a batch split passes through.
  d.sharding = independentAxesSharding([](const ShardingContext &) {
    return std::vector<int64_t>{1, 2, 3};
  });
}

} // namespace dtc::ops
