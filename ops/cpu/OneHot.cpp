// CPU kernel of OneHot: indices f32, i32 or i64 (floats truncated toward zero), depth from the
// output's shape (the plan's static shape; the depth input is checked against it at run time),
// values of any fixed-size dtype copied by element size: off_value everywhere, on_value where
// the (normalized) index equals the position along the new axis; out-of-range indices give an
// all-off line.
#include "ops/cpu/IndexUtil.h"

#include <cmath>

namespace dtc::ops::cpu {

namespace {

double readNumber(const void *p, ir::DType t, int64_t i) {
  switch (t) {
  case ir::DType::kFloat32:
    return static_cast<const float *>(p)[i];
  case ir::DType::kFloat64:
    return static_cast<const double *>(p)[i];
  case ir::DType::kInt32:
    return static_cast<const int32_t *>(p)[i];
  default:
    return static_cast<double>(static_cast<const int64_t *>(p)[i]);
  }
}

const std::vector<ir::DType> kOneHotIndexTypes = {ir::DType::kFloat32, ir::DType::kFloat64,
                                                  ir::DType::kInt32, ir::DType::kInt64};

class OneHotKernel : public Kernel {
public:
  OneHotKernel(const KernelSpec &spec, int64_t axis)
      : where_(spec.where()), indexType_(spec.inputs[0].dtype), depthType_(spec.inputs[1].dtype),
        elem_(static_cast<size_t>(ir::dtypeSize(spec.inputs[2].dtype))) {
    const std::vector<int64_t> &id = spec.inputs[0].shape;
    for (size_t k = 0; k < id.size(); ++k)
      (static_cast<int64_t>(k) < axis ? outer_ : inner_) *= id[k];
    depth_ = spec.outputs[0].shape[static_cast<size_t>(axis)];
  }

  Status run(const KernelArgs &args) override {
    const double depth = readNumber(args.inputs[1], depthType_, 0);
    if (static_cast<int64_t>(std::trunc(depth)) != depth_)
      return Status::error(where_, "depth " + std::to_string(depth) +
                                       " differs from the output's length " +
                                       std::to_string(depth_) + " the plan was made for");
    const char *values = static_cast<const char *>(args.inputs[2]);
    char *out = static_cast<char *>(args.outputs[0]);
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t j = 0; j < depth_; ++j)
        for (int64_t i = 0; i < inner_; ++i) {
          int64_t v = static_cast<int64_t>(
              std::trunc(readNumber(args.inputs[0], indexType_, o * inner_ + i)));
          if (v < 0)
            v += depth_;
          std::memcpy(out + static_cast<size_t>((o * depth_ + j) * inner_ + i) * elem_,
                      values + (v == j ? elem_ : 0), elem_);
        }
    return Status::ok();
  }

private:
  std::string where_;
  ir::DType indexType_, depthType_;
  size_t elem_;
  int64_t outer_ = 1, inner_ = 1, depth_ = 0;
};

Expected<int64_t> oneHotAxis(const KernelSpec &spec) {
  const int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size()) + 1;
  int64_t axis = spec.attrInt("axis", -1);
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  if (!normalizeAxisValue(axis, rank))
    return spec.error("axis " + std::to_string(axis) + " is out of range for output rank " +
                      std::to_string(rank));
  return axis;
}

} // namespace

Status checkOneHot(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 3, 3, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, kOneHotIndexTypes));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, kOneHotIndexTypes));
  DTC_RETURN_IF_ERROR(checkIndexDataDType(spec, true, 2));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[2].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  if (spec.inputs[1].numElements() != 1)
    return spec.error("input 1 (depth) has shape " + shapeStr(spec.inputs[1].shape) +
                      "; expected a scalar");
  if (spec.inputs[2].numElements() != 2)
    return spec.error("input 2 (values) has shape " + shapeStr(spec.inputs[2].shape) +
                      "; expected [off_value, on_value]");
  DTC_ASSIGN_OR_RETURN(int64_t axis, oneHotAxis(spec));
  const std::vector<int64_t> &out = spec.outputs[0].shape;
  std::vector<int64_t> want = spec.inputs[0].shape;
  if (out.size() != want.size() + 1)
    return spec.error("output 0 " + shapeStr(out) + " must have rank " +
                      std::to_string(want.size() + 1));
  want.insert(want.begin() + axis, out[static_cast<size_t>(axis)]);
  return checkOutputShape(spec, want);
}

Expected<KernelPtr> createOneHot(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(int64_t axis, oneHotAxis(spec));
  return KernelPtr(std::make_unique<OneHotKernel>(spec, axis));
}

} // namespace dtc::ops::cpu
