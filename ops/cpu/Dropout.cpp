// CPU kernel of Dropout in inference (canonical opset-12/13 form: data, ratio?, training_mode?
// -> output, mask?): output = data (a copy, skipped when the planner ran it in place), mask all
// true. A training_mode input that is true at run time is an error: training-mode Dropout
// belongs to training plans.
#include "ops/cpu/OneDnnUtil.h"

#include <cstring>

namespace dtc::ops::cpu {

namespace {

class DropoutKernel : public Kernel {
public:
  explicit DropoutKernel(const KernelSpec &spec)
      : where_(spec.where()), bytes_(static_cast<size_t>(spec.outputs[0].byteSize())),
        maskBytes_(spec.outputs.size() > 1 && spec.outputs[1].present()
                       ? static_cast<size_t>(spec.outputs[1].byteSize())
                       : 0) {}

  Status run(const KernelArgs &args) override {
    if (args.numInputs > 2 && args.inputs[2] && *static_cast<const uint8_t *>(args.inputs[2]))
      return Status::error(where_, "training-mode Dropout runs in training plans (not yet)");
    if (args.outputs[0] != args.inputs[0])
      std::memmove(args.outputs[0], args.inputs[0], bytes_);
    if (maskBytes_ > 0 && args.numOutputs > 1 && args.outputs[1])
      std::memset(args.outputs[1], 1, maskBytes_);
    return Status::ok();
  }

private:
  std::string where_;
  size_t bytes_, maskBytes_;
};

} // namespace

Status checkDropout(const KernelSpec &spec) {
  if (spec.inputs.empty() || spec.inputs.size() > 3 || spec.outputs.empty() ||
      spec.outputs.size() > 2)
    return spec.error("expected 1 to 3 inputs and 1 to 2 outputs, got " +
                      std::to_string(spec.inputs.size()) + " and " +
                      std::to_string(spec.outputs.size()));
  if (!spec.inputs[0].present() || !spec.outputs[0].present())
    return spec.error("input 0 and output 0 are required");
  const std::vector<ir::DType> floats = {ir::DType::kFloat32, ir::DType::kFloat64,
                                         ir::DType::kFloat16, ir::DType::kBFloat16};
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, floats));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  if (spec.inputs.size() > 1 && spec.inputs[1].present())
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, floats));
  if (spec.inputs.size() > 2 && spec.inputs[2].present())
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 2, {ir::DType::kBool}));
  if (spec.outputs.size() > 1 && spec.outputs[1].present())
    DTC_RETURN_IF_ERROR(checkDType(spec, false, 1, {ir::DType::kBool}));
  DTC_RETURN_IF_ERROR(checkShapes(spec, 64));
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].present() && spec.inputs[i].numElements() != 1)
      return spec.error(std::string(i == 1 ? "ratio " : "training_mode ") +
                        shapeStr(spec.inputs[i].shape) + " must be a scalar");
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  if (spec.outputs.size() > 1 && spec.outputs[1].present() &&
      spec.outputs[1].shape != spec.inputs[0].shape)
    return spec.error("mask has shape " + shapeStr(spec.outputs[1].shape) + ", expected " +
                      shapeStr(spec.inputs[0].shape));
  return Status::ok();
}

Expected<KernelPtr> createDropout(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<DropoutKernel>(spec));
}

int inPlaceDropout(const KernelSpec &) { return 0; }

} // namespace dtc::ops::cpu
