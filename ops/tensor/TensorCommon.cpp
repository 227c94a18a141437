// Shared helpers of the tensor operator family: element remapping for folds, axis lists, and the
// Reshape / Slice / Split size rules (ONNX operator specs, opset 13-21 forms).
#include "ops/tensor/TensorCommon.h"

#include "ops/ShapeHelpers.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <set>

namespace dtc::ops {

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;)
    strides[k - 1] = strides[k] * dims[k];
  return strides;
}

namespace {

/// Element size of `in` and element count of a folded result of `outDims`, or the error that
/// refuses the fold (an element type without a size, a result too large to fold).
Expected<std::pair<int64_t, int64_t>> foldSizes(const ir::TensorData &in,
                                                const std::vector<int64_t> &outDims,
                                                const std::string &where) {
  const int64_t size = ir::dtypeSize(in.dtype());
  if (size == 0)
    return Status::error(where,
                         std::string("cannot fold tensors of type ") + ir::dtypeName(in.dtype()));
  std::optional<int64_t> count = ir::checkedProduct(outDims);
  if (!count || *count > kMaxFoldElements)
    return Status::error(where,
                         "result of " + intsText(outDims) + " elements is too large to fold");
  return std::make_pair(size, *count);
}

} // namespace

Expected<ir::TensorDataPtr> remapElements(const std::string &name, const ir::TensorData &in,
                                          const std::vector<int64_t> &outDims,
                                          const std::function<int64_t(int64_t)> &src,
                                          const std::string &where, const std::string &fill) {
  DTC_ASSIGN_OR_RETURN(auto sizes, foldSizes(in, outDims, where));
  const int64_t size = sizes.first;
  const std::optional<int64_t> count = sizes.second;
  DTC_ASSIGN_OR_RETURN(const std::string *bytes, in.bytes());
  int64_t inCount = static_cast<int64_t>(bytes->size()) / size;
  std::string out(static_cast<size_t>(*count * size), '\0');
  for (int64_t k = 0; k < *count; ++k) {
    int64_t s = src(k);
    char *dst = out.data() + k * size;
    if (s < 0) {
      if (static_cast<int64_t>(fill.size()) == size)
        std::memcpy(dst, fill.data(), static_cast<size_t>(size));
      continue;
    }
    if (s >= inCount)
      return Status::error(where, "internal error: folded element index out of range");
    std::memcpy(dst, bytes->data() + s * size, static_cast<size_t>(size));
  }
  return ir::TensorDataPtr(ir::TensorData::fromBytes(name, in.dtype(), outDims, std::move(out)));
}

Expected<ir::TensorDataPtr> remapRuns(const std::string &name, const ir::TensorData &in,
                                      const std::vector<int64_t> &outDims, int64_t run,
                                      const std::function<int64_t(int64_t)> &src,
                                      const std::string &where) {
  DTC_ASSIGN_OR_RETURN(auto sizes, foldSizes(in, outDims, where));
  const int64_t size = sizes.first;
  const std::optional<int64_t> count = sizes.second;
  if (run <= 0 || *count % run != 0)
    return Status::error(where, "internal error: folded run length does not divide the result");
  DTC_ASSIGN_OR_RETURN(const std::string *bytes, in.bytes());
  const int64_t inCount = static_cast<int64_t>(bytes->size()) / size;
  std::string out(static_cast<size_t>(*count * size), '\0');
  for (int64_t k = 0; k < *count / run; ++k) {
    const int64_t s = src(k);
    if (s < 0 || s > inCount - run)
      return Status::error(where, "internal error: folded element index out of range");
    std::memcpy(out.data() + k * run * size, bytes->data() + s * size,
                static_cast<size_t>(run * size));
  }
  return ir::TensorDataPtr(ir::TensorData::fromBytes(name, in.dtype(), outDims, std::move(out)));
}

Expected<ir::TensorDataPtr> transposeElements(const std::string &name, const ir::TensorData &in,
                                              const std::vector<int64_t> &viewDims,
                                              const std::vector<int64_t> &perm,
                                              const std::string &where) {
  std::vector<int64_t> outDims;
  for (int64_t p : perm)
    outDims.push_back(viewDims[static_cast<size_t>(p)]);
  std::vector<int64_t> inStrides = rowMajorStrides(viewDims);
  const size_t rank = viewDims.size();
  auto src = [&](int64_t k) {
    int64_t s = 0;
    for (size_t a = rank; a-- > 0;) {
      s += (k % outDims[a]) * inStrides[static_cast<size_t>(perm[a])];
      k /= outDims[a];
    }
    return s;
  };
  return remapElements(name, in, outDims, src, where);
}

Expected<ir::TensorDataPtr> withDims(const std::string &name, const ir::TensorData &in,
                                     const std::vector<int64_t> &dims, const std::string &where) {
  std::optional<int64_t> count = ir::checkedProduct(dims);
  if (!count || *count != in.numElements())
    return Status::error(where, "cannot give " + std::to_string(in.numElements()) +
                                    " elements the shape " + intsText(dims));
  return remapElements(
      name, in, dims, [](int64_t k) { return k; }, where);
}

std::optional<std::vector<int64_t>> staticInts(InferenceContext &ctx, size_t i) {
  const std::vector<ir::Dim> *v = ctx.shapeValue(i);
  if (!v)
    return std::nullopt;
  std::vector<int64_t> out;
  for (const ir::Dim &d : *v) {
    if (!d.isStatic())
      return std::nullopt;
    out.push_back(d.value());
  }
  return out;
}

Expected<std::vector<int64_t>> normalizeAxes(const std::vector<int64_t> &axes, int64_t rank,
                                             const std::string &where, const std::string &what) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    DTC_ASSIGN_OR_RETURN(int64_t n, normalizeAxis(a, rank, where, what));
    if (!seen.insert(n).second)
      return Status::error(where,
                           what + " " + std::to_string(a) + " is repeated in " + intsText(axes));
    out.push_back(n);
  }
  return out;
}

Status rejectNegativeAttrBefore11(const ir::Node &node, int64_t opset,
                                  const std::string &attrName) {
  if (opset >= 11)
    return Status::ok();
  const ir::Attribute *a = node.attr(attrName);
  if (!a)
    return Status::ok();
  std::vector<int64_t> values;
  if (a->kind() == ir::AttrKind::kInt)
    values.push_back(a->i());
  else if (a->kind() == ir::AttrKind::kInts)
    values = a->ints();
  for (int64_t v : values)
    if (v < 0)
      return Status::error(node.where(), "negative " + attrName + " " + std::to_string(v) +
                                             " is not allowed before opset 11 (model opset " +
                                             std::to_string(opset) + ")");
  return Status::ok();
}

Expected<std::vector<ir::Dim>> reshapeDims(const ir::Shape &in, const std::vector<ir::Dim> &target,
                                           bool allowZero, const std::string &where) {
  std::vector<ir::Dim> out;
  int64_t inferIdx = -1;
  bool hasZero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    const ir::Dim &t = target[i];
    if (!t.isStatic()) {
      out.push_back(t);
      continue;
    }
    int64_t v = t.value();
    if (v == -1) {
      if (inferIdx >= 0)
        return Status::error(where, "shape " + std::to_string(i) +
                                        " is a second -1; at most one dimension may be -1");
      inferIdx = static_cast<int64_t>(i);
      out.push_back(ir::Dim::unknown());
    } else if (v == 0) {
      if (allowZero) {
        hasZero = true;
        out.push_back(t);
      } else if (!in.hasRank()) {
        out.push_back(ir::Dim::unknown());
      } else if (i >= in.rank()) {
        return Status::error(where,
                             "shape[" + std::to_string(i) +
                                 "] is 0 (copy the input dimension) but the input has rank " +
                                 std::to_string(in.rank()));
      } else {
        out.push_back(in[i]);
      }
    } else if (v < -1) {
      return Status::error(where, "shape[" + std::to_string(i) + "] is " + std::to_string(v) +
                                      "; dimensions must be >= -1");
    } else {
      out.push_back(t);
    }
  }
  ir::Dim total = in.product();
  if (inferIdx >= 0) {
    if (allowZero && hasZero)
      return Status::error(where, "shape has both -1 and 0 with allowzero=1");
    ir::Dim others = ir::Dim::fixed(1);
    for (size_t i = 0; i < out.size(); ++i)
      if (static_cast<int64_t>(i) != inferIdx)
        others = others * out[i];
    if (total.isUnknown() || others.isUnknown())
      return out;
    if (others.isStatic() && others.value() == 0)
      return Status::error(where, "cannot infer the -1 dimension: the other dimensions have 0 "
                                  "elements");
    if (std::optional<ir::Dim> q = total.dividedBy(others)) {
      out[inferIdx] = *q;
      return out;
    }
    if (total.isStatic() && others.isStatic())
      return Status::error(where, "cannot reshape " + in.str() + " (" + total.str() +
                                      " elements) into a shape whose known dimensions multiply "
                                      "to " +
                                      others.str());
    return out;
  }
  ir::Dim produced = ir::Shape(out).product();
  if (total.isStatic() && produced.isStatic() && total.value() != produced.value())
    return Status::error(where, "cannot reshape " + in.str() + " (" + total.str() +
                                    " elements) into " + ir::Shape(out).str() + " (" +
                                    produced.str() + " elements)");
  return out;
}

Expected<SliceRange> sliceRange(int64_t dim, int64_t start, int64_t end, int64_t step,
                                const std::string &where) {
  if (step == 0)
    return Status::error(where, "slice step must not be 0");
  return clampSlice(dim, start, end, step);
}

Expected<std::vector<int64_t>> splitSizes(int64_t dim,
                                          const std::optional<std::vector<int64_t>> &split,
                                          int64_t numOutputs, const std::string &where) {
  if (split) {
    if (static_cast<int64_t>(split->size()) != numOutputs)
      return Status::error(where, "split " + intsText(*split) + " has " +
                                      std::to_string(split->size()) + " entries but the node has " +
                                      std::to_string(numOutputs) + " outputs");
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0)
        return Status::error(where, "split " + intsText(*split) + " has a negative size");
      if (__builtin_add_overflow(sum, s, &sum))
        return Status::error(where, "split " + intsText(*split) + " overflows int64");
    }
    if (sum != dim)
      return Status::error(where, "split " + intsText(*split) + " sums to " + std::to_string(sum) +
                                      " but the axis has size " + std::to_string(dim));
    return *split;
  }
  if (numOutputs < 1)
    return Status::error(where, "num_outputs must be at least 1");
  int64_t chunk = dim / numOutputs + (dim % numOutputs != 0 ? 1 : 0);
  int64_t last = dim - chunk * (numOutputs - 1);
  if (last < 0)
    return Status::error(where, "an axis of size " + std::to_string(dim) +
                                    " cannot be split into " + std::to_string(numOutputs) +
                                    " outputs");
  std::vector<int64_t> sizes(static_cast<size_t>(numOutputs), chunk);
  sizes.back() = last;
  return sizes;
}

std::string intsText(const std::vector<int64_t> &v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

Status normalizeAxesAttribute(ir::Node &node, NormalizeContext &ctx) {
  if (ctx.opset() >= 13)
    return Status::ok();
  DTC_RETURN_IF_ERROR(rejectNegativeAttrBefore11(node, ctx.opset(), "axes"));
  ctx.attrToInput(node, "axes", 1);
  return Status::ok();
}

Expected<std::vector<int64_t>> gradConstantInts(GradientContext &ctx, size_t i,
                                                const std::string &what) {
  ir::Value *v = ctx.input(i);
  if (!v || !v->initializer())
    return ctx.error("gradient: input '" + what + "' must be a constant");
  return v->initializer()->toInt64s();
}

Status reshapeGradient(GradientContext &ctx) {
  DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                       ctx.reshapeTo(ctx.outputGrad(0), ctx.input(0)->shape().staticSizes()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace dtc::ops
