// CPU kernel of CumSum (f32, f64, i32, i64; axis from input 1, an int32/int64 scalar read at run
// time): per (outer, inner) line along the axis, a running sum in the element type, forward or
// reversed, inclusive or exclusive. Hand loop over the inner dims as the vector lane: line k of
// the running sum is the previous line plus the input line.
#include "ops/cpu/IndexUtil.h"

namespace dtc::ops::cpu {

namespace {

class CumSumKernel : public Kernel {
public:
  explicit CumSumKernel(const KernelSpec &spec)
      : where_(spec.where()), dtype_(spec.inputs[0].dtype), axisType_(spec.inputs[1].dtype),
        shape_(spec.inputs[0].shape), exclusive_(spec.attrInt("exclusive", 0) != 0),
        reverse_(spec.attrInt("reverse", 0) != 0) {}

  Status run(const KernelArgs &args) override {
    int64_t axis = readIndexTensor(args.inputs[1], axisType_, 1)[0];
    const int64_t rank = static_cast<int64_t>(shape_.size());
    if (!normalizeAxisValue(axis, rank))
      return Status::error(where_, "axis " + std::to_string(axis) + " is out of range for rank " +
                                       std::to_string(rank));
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < rank; ++k) {
      if (k < axis)
        outer *= shape_[static_cast<size_t>(k)];
      else if (k > axis)
        inner *= shape_[static_cast<size_t>(k)];
    }
    const int64_t n = shape_[static_cast<size_t>(axis)];
    switch (dtype_) {
    case ir::DType::kFloat64:
      scan<double>(args, outer, n, inner);
      break;
    case ir::DType::kInt32:
      scan<int32_t>(args, outer, n, inner);
      break;
    case ir::DType::kInt64:
      scan<int64_t>(args, outer, n, inner);
      break;
    default:
      scan<float>(args, outer, n, inner);
      break;
    }
    return Status::ok();
  }

private:
  template <typename T>
  void scan(const KernelArgs &args, int64_t outer, int64_t n, int64_t inner) const {
    const T *x = static_cast<const T *>(args.inputs[0]);
    T *y = static_cast<T *>(args.outputs[0]);
    std::vector<T> acc(static_cast<size_t>(inner));
    for (int64_t o = 0; o < outer; ++o) {
      std::fill(acc.begin(), acc.end(), T{0});
      for (int64_t s = 0; s < n; ++s) {
        const int64_t j = reverse_ ? n - 1 - s : s;
        const T *xl = x + (o * n + j) * inner;
        T *yl = y + (o * n + j) * inner;
        // Reads x's line before writing y's: correct in place.
        for (int64_t i = 0; i < inner; ++i) {
          const T v = xl[i];
          if (exclusive_) {
            yl[i] = acc[static_cast<size_t>(i)];
            acc[static_cast<size_t>(i)] += v;
          } else {
            acc[static_cast<size_t>(i)] += v;
            yl[i] = acc[static_cast<size_t>(i)];
          }
        }
      }
    }
  }

  std::string where_;
  ir::DType dtype_, axisType_;
  std::vector<int64_t> shape_;
  bool exclusive_, reverse_;
};

} // namespace

Status checkCumSum(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(
      checkDType(spec, true, 0,
                 {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kInt32, ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt32, ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  if (spec.inputs[0].shape.empty())
    return spec.error("input 0 must have rank >= 1");
  if (spec.inputs[1].numElements() != 1 || spec.inputs[1].shape.size() > 1)
    return spec.error("input 1 (axis) has shape " + shapeStr(spec.inputs[1].shape) +
                      "; expected a scalar");
  (void)spec.attrInt("exclusive", 0);
  (void)spec.attrInt("reverse", 0);
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  return checkOutputShape(spec, spec.inputs[0].shape);
}

Expected<KernelPtr> createCumSum(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<CumSumKernel>(spec));
}

int inPlaceCumSum(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cpu
