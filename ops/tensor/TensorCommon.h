// Helpers shared by the tensor/shape operator definitions (ops/tensor/): byte-level element
// copying for constant folding (any dtype except string), row-major index arithmetic, axis
// lists, and the Reshape/Slice/Split size rules used by both inference and folding.
#pragma once

#include "ops/OpDef.h"
#include "ops/ShapeHelpers.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dtc::ops {

/// Largest tensor (in elements) that folding produces; larger results are left to the runtime.
constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

/// Largest rank inferred from the length of a shape tensor whose contents are unknown.
constexpr int64_t kMaxInferredRank = 1024;

/// Row-major strides of `dims` (in elements).
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &dims);

/// Builds a tensor named `name` of `in`'s dtype and shape `outDims` whose element k is a copy of
/// input element src(k); when src(k) < 0 the element is `fill` (dtypeSize bytes; zeros when
/// empty). Errors (naming `where`): string tensors, results over kMaxFoldElements, unreadable
/// external data, or src(k) past the end of `in` (a bug in the caller's index rule).
Expected<ir::TensorDataPtr> remapElements(const std::string &name, const ir::TensorData &in,
                                          const std::vector<int64_t> &outDims,
                                          const std::function<int64_t(int64_t)> &src,
                                          const std::string &where, const std::string &fill = {});

/// As remapElements, a run of `run` elements at a time (run > 0, dividing the output's element
/// count): output elements [k * run, (k + 1) * run) are a copy of input elements [src(k),
/// src(k) + run). One call and one memcpy per run instead of per element (a Slice whose last
/// axis has step 1 copies whole rows). No fill: src(k) must be in range.
Expected<ir::TensorDataPtr> remapRuns(const std::string &name, const ir::TensorData &in,
                                      const std::vector<int64_t> &outDims, int64_t run,
                                      const std::function<int64_t(int64_t)> &src,
                                      const std::string &where);

/// `in` read with dims `viewDims` (same element count) and transposed by `perm` (a
/// permutation, checked by the caller): a tensor of dims viewDims[perm[i]] named `name`. Errors
/// as remapElements. Transpose, DepthToSpace and SpaceToDepth fold through it.
Expected<ir::TensorDataPtr> transposeElements(const std::string &name, const ir::TensorData &in,
                                              const std::vector<int64_t> &viewDims,
                                              const std::vector<int64_t> &perm,
                                              const std::string &where);

/// The same bytes as `in` under new dims (element counts must agree; error otherwise).
Expected<ir::TensorDataPtr> withDims(const std::string &name, const ir::TensorData &in,
                                     const std::vector<int64_t> &dims, const std::string &where);

/// Static integer contents of input i (constant or data-propagated) when every element is
/// static; nullopt otherwise.
std::optional<std::vector<int64_t>> staticInts(InferenceContext &ctx, size_t i);

/// Maps each axis into [0, rank) and rejects duplicates; errors name `where` and `what`.
Expected<std::vector<int64_t>> normalizeAxes(const std::vector<int64_t> &axes, int64_t rank,
                                             const std::string &where,
                                             const std::string &what = "axis");

/// Normalization helper: before opset 11, `attrName` (int or ints) must not be negative.
Status rejectNegativeAttrBefore11(const ir::Node &node, int64_t opset, const std::string &attrName);

/// Squeeze/Unsqueeze before opset 13: the `axes` attribute becomes the int64 input 1
/// (negative axes are an error before opset 11).
Status normalizeAxesAttribute(ir::Node &node, NormalizeContext &ctx);

/// Reshape's output dims (ONNX Reshape-14): 0 copies the input dim (or is a real 0 with
/// allowZero), one -1 is inferred from the element count (exact for symbolic monomials, unknown
/// when not computable). Errors: two -1s, a value < -1, 0 past the input rank, -1 together with
/// a 0 under allowZero, element counts that differ (static), -1 that does not divide.
Expected<std::vector<ir::Dim>> reshapeDims(const ir::Shape &in, const std::vector<ir::Dim> &target,
                                           bool allowZero, const std::string &where);

/// One axis of Slice (ONNX Slice-13 clamping rules): the first index taken and the number of
/// elements for a static `dim`. Errors on step 0.
Expected<SliceRange> sliceRange(int64_t dim, int64_t start, int64_t end, int64_t step,
                                const std::string &where);

/// Split sizes (ONNX Split-18) for an axis of static size `dim`: `split` when given (must sum to
/// dim, entries >= 0, one per output), else `numOutputs` chunks of ceil(dim/n) with a smaller
/// last chunk. Errors name `where`.
Expected<std::vector<int64_t>> splitSizes(int64_t dim,
                                          const std::optional<std::vector<int64_t>> &split,
                                          int64_t numOutputs, const std::string &where);

/// For gradient rules: the integer contents of constant input i (axes, pads, repeats, slice
/// bounds); an error naming the node and `what` when the input is not a constant.
Expected<std::vector<int64_t>> gradConstantInts(GradientContext &ctx, size_t i,
                                                const std::string &what);

/// The gradient rule of the ops that only change the shape (Reshape, Flatten, Squeeze,
/// Unsqueeze): dX = dY reshaped to input 0's static shape.
Status reshapeGradient(GradientContext &ctx);

/// ScatterElements and ScatterND (ops/tensor/ScatterElements.cpp): the gradient rule for
/// reduction none and add; `gatherOp` (GatherElements or GatherND) is the scatter's adjoint for
/// the updates.
Status scatterGradient(GradientContext &ctx, const std::string &gatherOp);
/// Folds a scatter whose update t (of `slice` contiguous elements) goes to data element offset
/// destination[t], combined by the node's `reduction`.
Expected<std::vector<ir::TensorDataPtr>>
foldScatter(FoldContext &ctx, const std::vector<int64_t> &destination, int64_t slice);

/// "[1,2,3]" for messages.
std::string intsText(const std::vector<int64_t> &v);

/// DepthToSpace (`depthToSpace`) or SpaceToDepth: the rank-4 input (N, C, H, W) and the
/// required attribute blocksize b > 0 (and, for DepthToSpace from opset 11, mode DCR or CRD);
/// inference (C divisible by b^2, or H and W by b, else an error naming the node; symbolic dims
/// divide exactly or become unknown), folding and the gradient, all through the 6-D views of
/// ops/tensor/SpaceDepthView.h. The gradient is the inverse permutation: dX =
/// Reshape(Transpose(Reshape(dY, permuted view), inverse perm), X's shape); SpaceToDepth is the
/// inverse of DCR DepthToSpace. Sets infer, fold, gradient, cost and sharding (batch axis).
void setSpaceDepthFacets(OpDef &d, bool depthToSpace);

} // namespace dtc::ops
