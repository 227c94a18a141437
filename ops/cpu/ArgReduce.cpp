// CPU kernel of ArgMax and ArgMin (f32, f64, i32, i64, u8 in; int64 out): per (outer, inner)
// line along the axis, the index of the best element, the first on ties (the last with
// select_last_index = 1), a NaN winning over numbers (the first NaN stays), as numpy.
#include "ops/cpu/IndexUtil.h"

#include <cmath>

namespace dtc::ops::cpu {

namespace {

class ArgReduceKernel : public Kernel {
public:
  ArgReduceKernel(const KernelSpec &spec, int64_t axis)
      : isMax_(spec.op == "ArgMax"), last_(spec.attrInt("select_last_index", 0) != 0),
        dtype_(spec.inputs[0].dtype) {
    const std::vector<int64_t> &s = spec.inputs[0].shape;
    for (size_t k = 0; k < s.size(); ++k) {
      if (static_cast<int64_t>(k) < axis)
        outer_ *= s[k];
      else if (static_cast<int64_t>(k) > axis)
        inner_ *= s[k];
    }
    n_ = s[static_cast<size_t>(axis)];
  }

  Status run(const KernelArgs &args) override {
    switch (dtype_) {
    case ir::DType::kFloat64:
      return scan<double>(args);
    case ir::DType::kInt32:
      return scan<int32_t>(args);
    case ir::DType::kInt64:
      return scan<int64_t>(args);
    case ir::DType::kUInt8:
      return scan<uint8_t>(args);
    default:
      return scan<float>(args);
    }
  }

private:
  template <typename T> Status scan(const KernelArgs &args) const {
    const T *x = static_cast<const T *>(args.inputs[0]);
    int64_t *y = static_cast<int64_t *>(args.outputs[0]);
    for (int64_t o = 0; o < outer_; ++o)
      for (int64_t i = 0; i < inner_; ++i) {
        const T *line = x + o * n_ * inner_ + i;
        int64_t best = 0;
        for (int64_t j = 1; j < n_; ++j) {
          const T a = line[j * inner_], b = line[best * inner_];
          bool better = (isMax_ ? a > b : a < b) || (last_ && a == b);
          if constexpr (std::is_floating_point_v<T>) {
            if (std::isnan(b))
              continue;
            better = better || std::isnan(a);
          }
          if (better)
            best = j;
        }
        y[o * inner_ + i] = best;
      }
    return Status::ok();
  }

  bool isMax_, last_;
  ir::DType dtype_;
  int64_t outer_ = 1, inner_ = 1, n_ = 0;
};

Expected<int64_t> argAxis(const KernelSpec &spec) {
  const int64_t rank = static_cast<int64_t>(spec.inputs[0].shape.size());
  int64_t axis = spec.attrInt("axis", 0);
  (void)spec.attrInt("keepdims", 1);
  (void)spec.attrInt("select_last_index", 0);
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  if (rank == 0)
    return spec.error("input 0 must have rank >= 1");
  if (!normalizeAxisValue(axis, rank))
    return spec.error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  return axis;
}

} // namespace

Status checkArgReduce(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0,
                                 {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kInt32,
                                  ir::DType::kInt64, ir::DType::kUInt8}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  DTC_ASSIGN_OR_RETURN(int64_t axis, argAxis(spec));
  std::vector<int64_t> out = spec.inputs[0].shape;
  if (out[static_cast<size_t>(axis)] == 0)
    return spec.error("axis " + std::to_string(axis) + " of input 0 " + shapeStr(out) +
                      " is empty");
  if (spec.attrInt("keepdims", 1) != 0)
    out[static_cast<size_t>(axis)] = 1;
  else
    out.erase(out.begin() + axis);
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createArgReduce(const KernelSpec &spec, CpuContext &) {
  DTC_ASSIGN_OR_RETURN(int64_t axis, argAxis(spec));
  return KernelPtr(std::make_unique<ArgReduceKernel>(spec, axis));
}

} // namespace dtc::ops::cpu
