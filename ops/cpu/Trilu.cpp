// CPU kernel of Trilu (any fixed-size dtype, copied by element size; k from the optional int64
// input 1, read at run time): per matrix of the last two axes, row i keeps the columns j with
// j - i >= k (upper) or j - i <= k (lower), as contiguous runs, and zeroes the rest.
#include "ops/cpu/IndexUtil.h"

#include <algorithm>

namespace dtc::ops::cpu {

namespace {

class TriluKernel : public Kernel {
public:
  explicit TriluKernel(const KernelSpec &spec)
      : upper_(spec.attrInt("upper", 1) != 0),
        elem_(static_cast<size_t>(ir::dtypeSize(spec.inputs[0].dtype))) {
    const std::vector<int64_t> &s = spec.inputs[0].shape;
    rows_ = s[s.size() - 2];
    cols_ = s.back();
    matrices_ = rows_ * cols_ == 0 ? 0 : spec.inputs[0].numElements() / (rows_ * cols_);
  }

  Status run(const KernelArgs &args) override {
    const int64_t k =
        args.numInputs > 1 && args.inputs[1] ? *static_cast<const int64_t *>(args.inputs[1]) : 0;
    const char *x = static_cast<const char *>(args.inputs[0]);
    char *y = static_cast<char *>(args.outputs[0]);
    const size_t rowBytes = static_cast<size_t>(cols_) * elem_;
    for (int64_t m = 0; m < matrices_; ++m)
      for (int64_t i = 0; i < rows_; ++i) {
        const size_t off = static_cast<size_t>(m * rows_ + i) * rowBytes;
        // Kept columns: [max(0, i + k), cols) for upper, [0, min(cols, i + k + 1)) for lower.
        const int64_t lo = upper_ ? std::clamp<int64_t>(i + k, 0, cols_) : 0;
        const int64_t hi = upper_ ? cols_ : std::clamp<int64_t>(i + k + 1, 0, cols_);
        const size_t a = static_cast<size_t>(lo) * elem_, b = static_cast<size_t>(hi) * elem_;
        // Copies the kept run (nothing to copy in place) and zeroes around it.
        if (b > a) {
          if (y != x)
            std::memcpy(y + off + a, x + off + a, b - a);
          std::memset(y + off, 0, a);
          std::memset(y + off + b, 0, rowBytes - b);
        } else {
          std::memset(y + off, 0, rowBytes);
        }
      }
    return Status::ok();
  }

private:
  bool upper_;
  size_t elem_;
  int64_t rows_ = 0, cols_ = 0, matrices_ = 0;
};

} // namespace

Status checkTrilu(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(
      spec, true, 0,
      {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kFloat16, ir::DType::kBFloat16,
       ir::DType::kInt8, ir::DType::kInt16, ir::DType::kInt32, ir::DType::kInt64, ir::DType::kUInt8,
       ir::DType::kUInt16, ir::DType::kUInt32, ir::DType::kUInt64, ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  if (spec.inputs.size() > 1 && spec.inputs[1].present()) {
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt64}));
    if (spec.inputs[1].numElements() != 1)
      return spec.error("input 1 (k) has shape " + shapeStr(spec.inputs[1].shape) +
                        "; expected a scalar");
  }
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  if (spec.inputs[0].shape.size() < 2)
    return spec.error("input 0 must have rank >= 2, got " + shapeStr(spec.inputs[0].shape));
  (void)spec.attrInt("upper", 1);
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  return checkOutputShape(spec, spec.inputs[0].shape);
}

Expected<KernelPtr> createTrilu(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<TriluKernel>(spec));
}

int inPlaceTrilu(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cpu
