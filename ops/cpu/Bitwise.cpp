// CPU kernels of BitwiseAnd, BitwiseOr, BitwiseXor (numpy broadcasting) and BitwiseNot over
// every integer type: bitwise operations do not depend on the sign, so the loops run on
// unsigned words of the element's size (1, 2, 4 or 8 bytes). Elements are read before written:
// correct in place on an operand of the output's shape.
#include "ops/cpu/BroadcastUtil.h"

namespace dtc::ops::cpu {

namespace {

const std::vector<ir::DType> kIntegerTypes = {
    ir::DType::kInt8,  ir::DType::kInt16,  ir::DType::kInt32,  ir::DType::kInt64,
    ir::DType::kUInt8, ir::DType::kUInt16, ir::DType::kUInt32, ir::DType::kUInt64};

/// Calls fn(W{}) with the unsigned word type of `bytes` bytes.
template <typename Fn> void withWord(int64_t bytes, Fn &&fn) {
  switch (bytes) {
  case 1:
    fn(uint8_t{});
    break;
  case 2:
    fn(uint16_t{});
    break;
  case 4:
    fn(uint32_t{});
    break;
  default:
    fn(uint64_t{});
  }
}

class BitwiseKernel : public Kernel {
public:
  explicit BitwiseKernel(const KernelSpec &spec)
      : op_(spec.op), size_(ir::dtypeSize(spec.inputs[0].dtype)), n_(spec.outputs[0].numElements()),
        loop_(spec.outputs[0].shape,
              {spec.inputs[0].shape,
               spec.inputs.size() > 1 ? spec.inputs[1].shape : spec.inputs[0].shape}) {}

  Status run(const KernelArgs &args) override {
    withWord(size_, [&](auto tag) {
      using W = decltype(tag);
      const W *a = static_cast<const W *>(args.inputs[0]);
      W *c = static_cast<W *>(args.outputs[0]);
      if (op_ == "BitwiseNot") {
        for (int64_t i = 0; i < n_; ++i)
          c[i] = static_cast<W>(~a[i]);
        return;
      }
      const W *b = static_cast<const W *>(args.inputs[1]);
      auto apply = [&](auto fn) {
        loop_.run([&](int64_t o, const std::array<int64_t, 2> &i) {
          c[o] = static_cast<W>(fn(a[i[0]], b[i[1]]));
        });
      };
      if (op_ == "BitwiseAnd")
        apply([](W x, W y) { return x & y; });
      else if (op_ == "BitwiseOr")
        apply([](W x, W y) { return x | y; });
      else
        apply([](W x, W y) { return x ^ y; });
    });
    return Status::ok();
  }

private:
  std::string op_;
  int64_t size_, n_;
  BroadcastLoop<2> loop_;
};

} // namespace

Status checkBitwise(const KernelSpec &spec) {
  const bool unary = spec.op == "BitwiseNot";
  DTC_RETURN_IF_ERROR(checkArity(spec, unary ? 1 : 2, unary ? 1 : 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, kIntegerTypes));
  if (!unary)
    DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  if (unary)
    return checkOutputShape(spec, spec.inputs[0].shape);
  std::vector<int64_t> out;
  if (!broadcastShapes(spec.inputs[0].shape, spec.inputs[1].shape, out))
    return spec.error("input shapes " + shapeStr(spec.inputs[0].shape) + " and " +
                      shapeStr(spec.inputs[1].shape) + " do not broadcast");
  return checkOutputShape(spec, out);
}

Expected<KernelPtr> createBitwise(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<BitwiseKernel>(spec));
}

int inPlaceBitwise(const KernelSpec &spec) {
  const auto &out = spec.outputs[0].shape;
  if (spec.inputs[0].shape == out)
    return 0;
  if (spec.inputs.size() > 1 && spec.inputs[1].shape == out)
    return 1;
  return -1;
}

} // namespace dtc::ops::cpu
