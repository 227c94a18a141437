// CPU kernels of the variadic elementwise ops Max, Min (f32, f64, every integer type), Sum and
// Mean (f32, f64) with numpy broadcasting of any number of inputs: output = broadcast copy of input
// 0, then combined with inputs 1, 2, ... in order (Mean divides the sum by n at the end). Max and
// Min give NaN when any input is NaN (np.maximum / np.minimum, the ONNX reference). Hand loops.
#include "ops/cpu/BroadcastUtil.h"

#include <cmath>
#include <limits>

namespace dtc::ops::cpu {

namespace {

enum class VarOp { kMax, kMin, kSum, kMean };

VarOp varOp(const std::string &op) {
  return op == "Max"   ? VarOp::kMax
         : op == "Min" ? VarOp::kMin
         : op == "Sum" ? VarOp::kSum
                       : VarOp::kMean;
}

template <typename T> T combine(VarOp op, T acc, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    if ((op == VarOp::kMax || op == VarOp::kMin) && (std::isnan(acc) || std::isnan(x)))
      return std::numeric_limits<T>::quiet_NaN();
  }
  switch (op) {
  case VarOp::kMax:
    return x > acc ? x : acc;
  case VarOp::kMin:
    return x < acc ? x : acc;
  default:
    return static_cast<T>(acc + x);
  }
}

class VariadicKernel : public Kernel {
public:
  explicit VariadicKernel(const KernelSpec &spec)
      : op_(varOp(spec.op)), dtype_(spec.outputs[0].dtype), n_(spec.outputs[0].numElements()) {
    const std::vector<int64_t> &out = spec.outputs[0].shape;
    first_ = BroadcastLoop<1>(out, {spec.inputs[0].shape});
    for (size_t i = 1; i < spec.inputs.size(); ++i)
      rest_.emplace_back(out, std::array<std::vector<int64_t>, 2>{out, spec.inputs[i].shape});
  }

  Status run(const KernelArgs &args) override {
    switch (dtype_) {
    case ir::DType::kFloat64:
      return loop<double>(args);
    case ir::DType::kInt8:
      return loop<int8_t>(args);
    case ir::DType::kInt16:
      return loop<int16_t>(args);
    case ir::DType::kInt32:
      return loop<int32_t>(args);
    case ir::DType::kInt64:
      return loop<int64_t>(args);
    case ir::DType::kUInt8:
      return loop<uint8_t>(args);
    case ir::DType::kUInt16:
      return loop<uint16_t>(args);
    case ir::DType::kUInt32:
      return loop<uint32_t>(args);
    case ir::DType::kUInt64:
      return loop<uint64_t>(args);
    default:
      return loop<float>(args);
    }
  }

private:
  template <typename T> Status loop(const KernelArgs &args) {
    T *y = static_cast<T *>(args.outputs[0]);
    const T *x0 = static_cast<const T *>(args.inputs[0]);
    // Input 0 may be the output's own buffer (in place): element o is read before written.
    first_.run([&](int64_t o, const std::array<int64_t, 1> &i) { y[o] = x0[i[0]]; });
    for (size_t k = 0; k < rest_.size(); ++k) {
      const T *x = static_cast<const T *>(args.inputs[k + 1]);
      const VarOp op = op_;
      rest_[k].run([&](int64_t o, const std::array<int64_t, 2> &i) {
        y[o] = combine<T>(op, y[o], x[i[1]]);
      });
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (op_ == VarOp::kMean && rest_.size() > 0) {
        const T count = static_cast<T>(rest_.size() + 1);
        for (int64_t o = 0; o < n_; ++o)
          y[o] /= count;
      }
    }
    return Status::ok();
  }

  VarOp op_;
  ir::DType dtype_;
  int64_t n_;
  BroadcastLoop<1> first_;
  std::vector<BroadcastLoop<2>> rest_;
};

} // namespace

Status checkVariadic(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1024, 1));
  const VarOp op = varOp(spec.op);
  if (op == VarOp::kMax || op == VarOp::kMin)
    DTC_RETURN_IF_ERROR(
        checkDType(spec, true, 0,
                   {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kInt8, ir::DType::kInt16,
                    ir::DType::kInt32, ir::DType::kInt64, ir::DType::kUInt8, ir::DType::kUInt16,
                    ir::DType::kUInt32, ir::DType::kUInt64}));
  else
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, {ir::DType::kFloat32, ir::DType::kFloat64}));
  for (size_t i = 1; i < spec.inputs.size(); ++i) {
    if (!spec.inputs[i].present())
      return spec.error("input " + std::to_string(i) + " is missing");
    DTC_RETURN_IF_ERROR(checkDType(spec, true, i, {spec.inputs[0].dtype}));
  }
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  std::vector<std::vector<int64_t>> shapes;
  std::string list;
  for (const TensorDesc &t : spec.inputs) {
    shapes.push_back(t.shape);
    list += (list.empty() ? "" : ", ") + shapeStr(t.shape);
  }
  std::vector<int64_t> out;
  if (!broadcastAll(shapes, out))
    return spec.error("input shapes " + list + " do not broadcast");
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createVariadic(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<VariadicKernel>(spec));
}

int inPlaceVariadic(const KernelSpec &spec) {
  // Only input 0: later inputs are read after the output was written from input 0.
  return spec.inputs[0].shape == spec.outputs[0].shape ? 0 : -1;
}

} // namespace dtc::ops::cpu
