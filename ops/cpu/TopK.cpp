// CPU kernel of TopK (ops/reduction/TopK.cpp): a partial sort of each row along the axis, in the
// order of ops/reduction/TopKOrder.h (equal values by ascending index). X f32, f64, i32 or i64;
// K (input 1, int64) is the compile-time constant that sized the outputs; Indices int64.
#include "ops/cpu/OneDnnUtil.h"
#include "ops/reduction/TopKOrder.h"

namespace dtc::ops::cpu {

namespace {

template <typename T> class TopKKernel : public Kernel {
public:
  TopKKernel(std::vector<int64_t> dims, int64_t axis, int64_t k, bool largest)
      : dims_(std::move(dims)), axis_(axis), k_(k), largest_(largest) {}

  Status run(const KernelArgs &args) override {
    topk::topK(static_cast<const T *>(args.inputs[0]), dims_, axis_, k_, largest_,
               static_cast<T *>(args.outputs[0]), static_cast<int64_t *>(args.outputs[1]));
    return Status::ok();
  }

private:
  std::vector<int64_t> dims_;
  int64_t axis_, k_;
  bool largest_;
};

} // namespace

Status checkTopK(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 2));
  DTC_RETURN_IF_ERROR(
      checkDType(spec, true, 0,
                 {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kInt32, ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 1, {ir::DType::kInt64}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  const std::vector<int64_t> &x = spec.inputs[0].shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = spec.attrInt("axis", -1);
  if (rank == 0 || axis < -rank || axis >= rank)
    return spec.error("axis " + std::to_string(axis) + " is out of range for X " + shapeStr(x));
  if (axis < 0)
    axis += rank;
  const std::vector<int64_t> &y = spec.outputs[0].shape;
  if (y.size() != x.size() || spec.outputs[1].shape != y)
    return spec.error("Values " + shapeStr(y) + " and Indices " + shapeStr(spec.outputs[1].shape) +
                      " must have X's rank and one shape");
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && y[static_cast<size_t>(d)] != x[static_cast<size_t>(d)])
      return spec.error("Values " + shapeStr(y) + " differs from X " + shapeStr(x) +
                        " off the axis");
  if (y[static_cast<size_t>(axis)] > x[static_cast<size_t>(axis)])
    return spec.error("k " + std::to_string(y[static_cast<size_t>(axis)]) +
                      " is larger than axis " + std::to_string(axis) + " of X " + shapeStr(x));
  return Status::ok();
}

Expected<KernelPtr> createTopK(const KernelSpec &spec, CpuContext &) {
  DTC_RETURN_IF_ERROR(checkTopK(spec));
  const std::vector<int64_t> &x = spec.inputs[0].shape;
  int64_t axis = spec.attrInt("axis", -1);
  if (axis < 0)
    axis += static_cast<int64_t>(x.size());
  const int64_t k = spec.outputs[0].shape[static_cast<size_t>(axis)];
  const bool largest = spec.attrInt("largest", 1) != 0;
  switch (spec.inputs[0].dtype) {
  case ir::DType::kFloat64:
    return KernelPtr(std::make_unique<TopKKernel<double>>(x, axis, k, largest));
  case ir::DType::kInt32:
    return KernelPtr(std::make_unique<TopKKernel<int32_t>>(x, axis, k, largest));
  case ir::DType::kInt64:
    return KernelPtr(std::make_unique<TopKKernel<int64_t>>(x, axis, k, largest));
  default:
    return KernelPtr(std::make_unique<TopKKernel<float>>(x, axis, k, largest));
  }
}

} // namespace dtc::ops::cpu
