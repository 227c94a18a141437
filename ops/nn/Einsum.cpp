// Einsum (opset 12, onnx/docs/Operators.md#Einsum): sums of products over the indices of an
// equation in numpy.einsum's notation (ops/nn/EinsumEquation.h): batched matmuls
// ("bhqd,bhkd->bhqk", "...ij,...jk->...ik"), transposes ("ij->ji"), diagonals and traces
// ("ii->i", "ii"), outer products ("i,j->ij"), reductions ("ij->i"), implicit outputs ("ij,jk").
// Kept as one op: its rank-dependent ellipsis cannot be rewritten at import, where ranks are not
// yet known. The CPU kernel (ops/cpu/Einsum.cpp) contracts operands pairwise through sgemm. The
// gradient with respect to an operand is again an Einsum.
#include "ops/OpDef.h"
#include "ops/Sharding.h"
#include "ops/nn/EinsumEquation.h"

#include <algorithm>
#include <set>

namespace dtc::ops {

namespace {

Status equationError(const ir::Node &node, const std::string &what) {
  return Status::error(node.where(), "equation '" + node.attrString("equation", "") + "': " + what);
}

Status inferEinsum(InferenceContext &ctx) {
  const ir::Node &node = ctx.node();
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i))
      return ctx.error("input " + std::to_string(i) + " is missing");
    if (!ctx.inputShape(i).hasRank()) {
      ctx.setOutputShape(0, ir::Shape::unknownRank());
      return Status::ok();
    }
    ranks.push_back(static_cast<int64_t>(ctx.inputShape(i).rank()));
  }
  einsum::Equation eq;
  if (std::string err = einsum::parse(node.attrString("equation", ""), ranks, eq); !err.empty())
    return equationError(node, err);
  // Each label's dim: a static one where any operand has it (they must agree), else a symbol;
  // an ellipsis dim of 1 yields to any other (broadcasting).
  std::vector<ir::Dim> dims(static_cast<size_t>(eq.numLabels()), ir::Dim::unknown());
  std::vector<bool> set(dims.size(), false);
  for (size_t i = 0; i < eq.inputs.size(); ++i)
    for (size_t a = 0; a < eq.inputs[i].size(); ++a) {
      const int l = eq.inputs[i][a];
      const ir::Dim &d = ctx.inputShape(i)[a];
      ir::Dim &cur = dims[static_cast<size_t>(l)];
      const bool one = d.isStatic() && d.value() == 1;
      const bool curOne = cur.isStatic() && cur.value() == 1;
      if (!set[static_cast<size_t>(l)]) {
        cur = d;
        set[static_cast<size_t>(l)] = true;
      } else if (eq.isEllipsis(l) && (one || curOne)) {
        if (curOne)
          cur = d;
      } else if (d.isStatic() && cur.isStatic() && d.value() != cur.value()) {
        return equationError(node, eq.isEllipsis(l)
                                       ? "the '...' dims of input " + std::to_string(i) +
                                             " do not broadcast"
                                       : std::string("index '") + einsum::kLetters[l] +
                                             "' has sizes " + cur.str() + " and " + d.str());
      } else if (d.isStatic() && !cur.isStatic()) {
        cur = d;
      }
    }
  std::vector<ir::Dim> out;
  for (int l : eq.output)
    out.push_back(dims[static_cast<size_t>(l)]);
  ctx.setOutputShape(0, ir::Shape(std::move(out)));
  return Status::ok();
}

/// Parses the node's equation for its (static) input dims and sizes its labels.
Expected<std::pair<einsum::Equation, std::vector<int64_t>>>
staticEquation(const ir::Node &node, const std::vector<std::vector<int64_t>> &dims) {
  std::vector<int64_t> ranks;
  for (const auto &d : dims)
    ranks.push_back(static_cast<int64_t>(d.size()));
  einsum::Equation eq;
  if (std::string err = einsum::parse(node.attrString("equation", ""), ranks, eq); !err.empty())
    return equationError(node, err);
  std::vector<int64_t> sizes;
  if (std::string err = einsum::labelSizes(eq, dims, sizes); !err.empty())
    return equationError(node, err);
  return std::make_pair(std::move(eq), std::move(sizes));
}

// The gradient of operand i is the Einsum of dY and the other operands onto operand i's indices
// (each product term's partial derivative), with the ellipsis written out as letters (shapes are
// static here): an ellipsis dim that an operand broadcasts (size 1 against n) gets a letter of its
// own, so it is summed over. Letters of operand i that occur in no other term (summed away in the
// forward) are absent from that Einsum: its result is then expanded along them. For an operand
// with a repeated index (a diagonal, "ii->i"), each repeat gets a letter of its own tied to the
// first by an identity-matrix operand ("i,ij->ij" with eye), which writes the gradient onto the
// diagonal.
Status einsumGrad(GradientContext &ctx) {
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy)
    return Status::ok();
  const ir::Node &node = ctx.node();
  const size_t n = node.numInputs();
  std::vector<std::vector<int64_t>> dims;
  for (size_t i = 0; i < n; ++i)
    dims.push_back(ctx.input(i)->shape().staticSizes());
  DTC_ASSIGN_OR_RETURN(auto parsed, staticEquation(node, dims));
  const einsum::Equation &eq = parsed.first;
  const std::vector<int64_t> &sizes = parsed.second;
  // Letters for every axis: named labels keep theirs, ellipsis labels get unused letters; a
  // broadcast ellipsis dim gets a fresh letter.
  std::set<int> used;
  for (const auto &in : eq.inputs)
    for (int l : in)
      if (!eq.isEllipsis(l))
        used.insert(l);
  int next = 0;
  auto fresh = [&]() -> int {
    while (next < einsum::kNumLetters && used.count(next))
      ++next;
    if (next >= einsum::kNumLetters)
      return -1;
    used.insert(next);
    return next;
  };
  std::vector<int> ellipsisLetter(static_cast<size_t>(eq.ellipsisRank));
  for (int &l : ellipsisLetter)
    if ((l = fresh()) < 0)
      return ctx.error("the gradient's equation needs more than 52 letters");
  std::vector<std::string> terms(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t a = 0; a < eq.inputs[i].size(); ++a) {
      int l = eq.inputs[i][a];
      if (eq.isEllipsis(l)) {
        const size_t e = static_cast<size_t>(l - einsum::kNumLetters);
        l = dims[i][a] == sizes[static_cast<size_t>(l)] ? ellipsisLetter[e] : fresh();
        if (l < 0)
          return ctx.error("the gradient's equation needs more than 52 letters");
      }
      terms[i] += einsum::kLetters[l];
    }
  std::string outTerm;
  for (int l : eq.output)
    outTerm += einsum::kLetters[eq.isEllipsis(l)
                                    ? ellipsisLetter[static_cast<size_t>(l - einsum::kNumLetters)]
                                    : l];
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.needsGrad(i))
      continue;
    // A repeated index (a diagonal) gets a fresh letter for each repeat, tied to the first by an
    // identity matrix operand: the gradient lands on the diagonal and is zero elsewhere.
    std::string t;
    std::string eyes;
    std::vector<ir::Value *> eyeInputs;
    for (size_t a = 0; a < terms[i].size(); ++a) {
      const char c = terms[i][a];
      if (terms[i].find(c) == a) {
        t += c;
        continue;
      }
      const int l = fresh();
      if (l < 0)
        return ctx.error("the gradient's equation needs more than 52 letters");
      if (ctx.input(i)->dtype() != ir::DType::kFloat32)
        return ctx.error("the gradient of input " + std::to_string(i) +
                         " (a diagonal) is implemented for f32 only");
      const int64_t size = dims[i][a];
      std::vector<float> eye(static_cast<size_t>(size * size), 0.0f);
      for (int64_t k = 0; k < size; ++k)
        eye[static_cast<size_t>(k * size + k)] = 1.0f;
      eyeInputs.push_back(ctx.constantF32s(eye, {size, size}));
      t += einsum::kLetters[l];
      eyes += std::string(",") + c + einsum::kLetters[l];
    }
    std::string others = outTerm;
    std::vector<ir::Value *> inputs = {dy};
    for (size_t j = 0; j < n; ++j)
      if (j != i) {
        others += "," + terms[j];
        inputs.push_back(ctx.input(j));
      }
    others += eyes;
    inputs.insert(inputs.end(), eyeInputs.begin(), eyeInputs.end());
    std::string kept;
    std::vector<int64_t> keptShape;
    bool expand = false;
    for (size_t a = 0; a < t.size(); ++a) {
      const bool elsewhere = outTerm.find(t[a]) != std::string::npos ||
                             eyes.find(t[a]) != std::string::npos ||
                             std::any_of(terms.begin(), terms.end(), [&](const std::string &o) {
                               return &o != &terms[i] && o.find(t[a]) != std::string::npos;
                             });
      if (elsewhere) {
        kept += t[a];
        keptShape.push_back(dims[i][a]);
      } else {
        keptShape.push_back(1);
        expand |= dims[i][a] != 1;
      }
    }
    DTC_ASSIGN_OR_RETURN(
        ir::Value * g,
        ctx.emit1("Einsum", inputs, {{"equation", ir::Attribute(others + "->" + kept)}}));
    DTC_ASSIGN_OR_RETURN(g, ctx.reshapeTo(g, keptShape));
    if (expand) {
      DTC_ASSIGN_OR_RETURN(g, ctx.emit1("Expand", {g, ctx.constantI64s(dims[i])}));
    }
    ctx.setInputGrad(i, g);
  }
  return Status::ok();
}

// Sharding: the first split input leads. When its split axis carries an index that the output
// keeps (a batch or head index: "bhqd,bhkd->bhqk" split on h), every operand with that index is
// split along it, the others are replicated, and the output is split at the index's place; the
// work divides with no communication. An index summed over (a split contraction) or repeated in
// an operand, or an ellipsis dim that an operand broadcasts, falls back to replicated inputs.
Status einsumSharding(ShardingContext &ctx) {
  const ir::Node &node = ctx.node();
  int lead = -1;
  for (size_t i = 0; i < ctx.numInputs() && lead < 0; ++i)
    if (ctx.hasInput(i) && ctx.input(i).isSplit())
      lead = static_cast<int>(i);
  if (lead < 0)
    return Status::ok();
  std::vector<std::vector<int64_t>> dims;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    dims.push_back(ctx.inputDims(i));
  DTC_ASSIGN_OR_RETURN(auto parsed, staticEquation(node, dims));
  const einsum::Equation &eq = parsed.first;
  const ir::Sharding &s = ctx.input(static_cast<size_t>(lead));
  const int label = eq.inputs[static_cast<size_t>(lead)][static_cast<size_t>(s.axis)];
  const int64_t size = parsed.second[static_cast<size_t>(label)];
  auto outPos = std::find(eq.output.begin(), eq.output.end(), label);
  if (outPos == eq.output.end())
    return Status::ok();
  std::vector<int64_t> axisOf(ctx.numInputs(), -1);
  for (size_t i = 0; i < eq.inputs.size(); ++i)
    for (size_t a = 0; a < eq.inputs[i].size(); ++a) {
      if (eq.inputs[i][a] != label)
        continue;
      if (axisOf[i] >= 0 || dims[i][a] != size)
        return Status::ok(); // repeated in one operand, or broadcast along the split
      axisOf[i] = static_cast<int64_t>(a);
    }
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    ctx.require(i, axisOf[i] >= 0 ? ir::Sharding::split(axisOf[i], s.parts, s.blocks)
                                  : ir::Sharding::replicated());
  ctx.setOutput(0, ir::Sharding::split(outPos - eq.output.begin(), s.parts, s.blocks));
  return Status::ok();
}

} // namespace

OpDef defineEinsum() {
  OpDef d;
  d.name = "Einsum";
  d.version(12)
      .variadicIn("Inputs", "T")
      .out("Output", "T")
      .attr("equation", ir::AttrKind::kString, /*required=*/true)
      .type("T", kNumericTypes);
  d.infer = inferEinsum;
  d.gradient = einsumGrad;
  // Per point of the full index space (every label's size multiplied): one multiply per operand
  // after the first and one add: 2 M N K for a matmul, M N for a reduction of [M, N].
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    std::vector<std::vector<int64_t>> dims;
    for (size_t i = 0; i < ctx.numInputs(); ++i)
      dims.push_back(ctx.inputDims(i));
    auto parsed = staticEquation(ctx.node(), dims);
    if (!parsed)
      return ctx.error(parsed.status().message());
    std::vector<bool> present(parsed->second.size(), false);
    for (const auto &in : parsed->first.inputs)
      for (int l : in)
        present[static_cast<size_t>(l)] = true;
    double points = 1;
    for (size_t l = 0; l < present.size(); ++l)
      if (present[l])
        points *= static_cast<double>(parsed->second[l]);
    return ctx.withFlops(static_cast<double>(ctx.numInputs()) * points);
  };
  d.sharding = einsumSharding;
  return d;
}

} // namespace dtc::ops
