// The CUDA data-movement kernels' limits beyond what the CPU check already proved (shapes,
// attributes, dtypes): at most kDataMaxRank dims per operand (ops/cuda/DataUtil.cuh), elements
// moved by size (1, 2, 4 or 8 bytes), linear Resize along at most kResizeLinearMax axes, and the
// in-place rules (Cast between equal element sizes, Where over a branch of the output's shape).
#include "ops/cuda/Checks.h"
#include "ops/cuda/DataUtil.cuh"

#include <algorithm>

namespace dtc::ops::cuda {

namespace {

/// Errors unless every operand has rank <= kDataMaxRank.
Status checkRanks(const KernelSpec &spec) {
  auto one = [&](const TensorDesc &t, const std::string &what) -> Status {
    if (t.present() && t.shape.size() > static_cast<size_t>(kDataMaxRank))
      return spec.error(what + " has rank " + std::to_string(t.shape.size()) +
                        "; the CUDA kernel supports rank <= " + std::to_string(kDataMaxRank));
    return Status::ok();
  };
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    DTC_RETURN_IF_ERROR(one(spec.inputs[i], "input " + std::to_string(i)));
  for (size_t i = 0; i < spec.outputs.size(); ++i)
    DTC_RETURN_IF_ERROR(one(spec.outputs[i], "output " + std::to_string(i)));
  return Status::ok();
}

/// Errors unless input 0's elements are 1, 2, 4 or 8 bytes (the kernels move them by size).
Status checkElementSize(const KernelSpec &spec) {
  const int64_t size = ir::dtypeSize(spec.inputs[0].dtype);
  if (size == 1 || size == 2 || size == 4 || size == 8)
    return Status::ok();
  return spec.error("input 0 has dtype " + std::string(ir::dtypeName(spec.inputs[0].dtype)) +
                    "; the CUDA kernel moves elements of 1, 2, 4 or 8 bytes");
}

/// The number of axes along which a linear resize from `in` to `out` interpolates.
Status checkLinearAxes(const KernelSpec &spec, const std::vector<int64_t> &in,
                       const std::vector<int64_t> &out) {
  int resized = 0;
  for (size_t d = 0; d < in.size() && d < out.size(); ++d)
    resized += in[d] != out[d] ? 1 : 0;
  if (resized > kResizeLinearMax)
    return spec.error("mode=linear resizes " + std::to_string(resized) +
                      " axes; the CUDA kernel interpolates along at most " +
                      std::to_string(kResizeLinearMax));
  return Status::ok();
}

} // namespace

// Transpose, Slice, Concat, Split, Expand, Tile, Pad, Gather, GatherElements: any element size
// the CPU takes, rank <= kDataMaxRank.
Status checkDataMove(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkRanks(spec));
  return checkElementSize(spec);
}

// SliceGrad, GatherGrad, GatherElementsGrad: f32 (the CPU's dtype), rank <= kDataMaxRank.
Status checkDataGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkRanks(spec));
  DTC_RETURN_IF_ERROR(checkInputDType(spec, 0, {ir::DType::kFloat32}));
  return checkOutputDType(spec, 0, {ir::DType::kFloat32});
}

// Where's branches are f32, i32, i64 or bool (the CPU check): 1, 4 or 8 bytes.
Status checkWhere(const KernelSpec &spec) { return checkRanks(spec); }

int inPlaceWhere(const KernelSpec &spec) {
  // Each output element is written by the thread that read the branches' element at the same
  // offset, so output 0 may overwrite a branch of its own shape.
  const auto &out = spec.outputs[0].shape;
  if (spec.inputs[1].shape == out)
    return 1;
  if (spec.inputs[2].shape == out)
    return 2;
  return -1;
}

Status checkCast(const KernelSpec &spec) { return checkRanks(spec); }

int inPlaceCast(const KernelSpec &spec) {
  return ir::dtypeSize(spec.inputs[0].dtype) == ir::dtypeSize(spec.outputs[0].dtype) ? 0 : -1;
}

Status checkResize(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkRanks(spec));
  DTC_RETURN_IF_ERROR(checkElementSize(spec));
  if (spec.attrString("mode", "nearest") == "linear")
    return checkLinearAxes(spec, spec.inputs[0].shape, spec.outputs[0].shape);
  return Status::ok();
}

Status checkResizeGrad(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkRanks(spec));
  if (spec.attrString("mode", "nearest") == "linear")
    return checkLinearAxes(spec, spec.outputs[0].shape, spec.inputs[0].shape);
  return Status::ok();
}

} // namespace dtc::ops::cuda
