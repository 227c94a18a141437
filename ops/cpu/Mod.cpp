// CPU kernel of Mod with numpy broadcasting: f32, f64 (C fmod) and every integer type (fmod = 0:
// the divisor's sign, as Python's %; fmod = 1: the dividend's sign). An integer division by
// zero is a run-time error naming the node. Reads both operands of element o before writing it.
#include "ops/cpu/BroadcastUtil.h"

#include <cmath>

namespace dtc::ops::cpu {

namespace {

class ModKernel : public Kernel {
public:
  explicit ModKernel(const KernelSpec &spec)
      : where_(spec.where()), fmod_(spec.attrInt("fmod", 0) != 0), dtype_(spec.inputs[0].dtype),
        loop_(spec.outputs[0].shape, {spec.inputs[0].shape, spec.inputs[1].shape}) {}

  Status run(const KernelArgs &args) override {
    switch (dtype_) {
    case ir::DType::kFloat32:
      return mod<float>(args);
    case ir::DType::kFloat64:
      return mod<double>(args);
    case ir::DType::kInt8:
      return mod<int8_t>(args);
    case ir::DType::kInt16:
      return mod<int16_t>(args);
    case ir::DType::kInt32:
      return mod<int32_t>(args);
    case ir::DType::kUInt8:
      return mod<uint8_t>(args);
    case ir::DType::kUInt16:
      return mod<uint16_t>(args);
    case ir::DType::kUInt32:
      return mod<uint32_t>(args);
    case ir::DType::kUInt64:
      return mod<uint64_t>(args);
    default:
      return mod<int64_t>(args);
    }
  }

private:
  template <typename T> Status mod(const KernelArgs &args) {
    const T *a = static_cast<const T *>(args.inputs[0]);
    const T *b = static_cast<const T *>(args.inputs[1]);
    T *c = static_cast<T *>(args.outputs[0]);
    bool ok = loop_.run([&](int64_t o, const std::array<int64_t, 2> &i) {
      const T x = a[i[0]], y = b[i[1]];
      if constexpr (std::is_floating_point_v<T>) {
        c[o] = std::fmod(x, y);
      } else {
        if (y == 0)
          return false;
        T r;
        if constexpr (std::is_signed_v<T>)
          r = y == -1 ? T{0} : static_cast<T>(x % y);
        else
          r = static_cast<T>(x % y);
        if constexpr (std::is_signed_v<T>)
          if (!fmod_ && r != 0 && ((r < 0) != (y < 0)))
            r = static_cast<T>(r + y);
        c[o] = r;
      }
      return true;
    });
    if (!ok)
      return Status::error(where_, "integer division by zero");
    return Status::ok();
  }

  std::string where_;
  bool fmod_;
  ir::DType dtype_;
  BroadcastLoop<2> loop_;
};

} // namespace

Status checkMod(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(
      checkDType(spec, true, 0,
                 {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kInt8, ir::DType::kInt16,
                  ir::DType::kInt32, ir::DType::kInt64, ir::DType::kUInt8, ir::DType::kUInt16,
                  ir::DType::kUInt32, ir::DType::kUInt64}));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  const bool fmod = spec.attrInt("fmod", 0) != 0;
  if (!spec.attrKindError.empty())
    return spec.error(spec.attrKindError);
  if (ir::isFloat(spec.inputs[0].dtype) && !fmod)
    return spec.error("fmod must be 1 for float inputs");
  std::vector<int64_t> out;
  if (!broadcastShapes(spec.inputs[0].shape, spec.inputs[1].shape, out))
    return spec.error("input shapes " + shapeStr(spec.inputs[0].shape) + " and " +
                      shapeStr(spec.inputs[1].shape) + " do not broadcast");
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createMod(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<ModKernel>(spec));
}

int inPlaceMod(const KernelSpec &spec) {
  const auto &out = spec.outputs[0].shape;
  if (spec.inputs[0].shape == out)
    return 0;
  if (spec.inputs[1].shape == out)
    return 1;
  return -1;
}

} // namespace dtc::ops::cpu
