// CPU kernels of Add, Sub, Mul, Div with numpy broadcasting: oneDNN binary (f32) when an operand
// has the output's shape (Add/Mul may swap operands), else a broadcast loop (always for i64).
// i64 Div truncates toward zero (C++ '/', like onnxruntime); a zero divisor is a run error;
// overflow wraps (two's complement) and INT64_MIN / -1 gives INT64_MIN. Channels-last operands
// are allowed only when all three have one shape and one layout (a flat elementwise op).
#include "ops/cpu/OneDnnUtil.h"

#include <limits>

namespace dtc::ops::cpu {

namespace {

enum class BinOp { kAdd, kSub, kMul, kDiv };

BinOp binOp(const std::string &op) {
  if (op == "Add")
    return BinOp::kAdd;
  if (op == "Sub")
    return BinOp::kSub;
  if (op == "Mul")
    return BinOp::kMul;
  return BinOp::kDiv;
}

bool commutative(BinOp op) { return op == BinOp::kAdd || op == BinOp::kMul; }

/// Input 1's shape extended with leading 1s to `rank` dims (at least one dim).
std::vector<int64_t> padShape(const std::vector<int64_t> &s, size_t rank) {
  std::vector<int64_t> out(std::max<size_t>(rank, 1) - s.size(), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

/// Element strides of `in` read as a tensor of shape `out` (0 along broadcast dims).
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                      const std::vector<int64_t> &out) {
  std::vector<int64_t> padded = padShape(in, out.size());
  std::vector<int64_t> strides = rowMajorStrides(padded);
  for (size_t i = 0; i < padded.size(); ++i)
    if (padded[i] == 1)
      strides[i] = 0;
  strides.resize(std::max<size_t>(out.size(), 1));
  return strides;
}

/// The broadcast loop: out[i] = fn(a[ia(i)], b[ib(i)]) in increasing i, so it is correct in
/// place when the output aliases an operand of the output's shape.
class BroadcastKernel : public Kernel {
public:
  BroadcastKernel(const KernelSpec &spec, BinOp op)
      : where_(spec.where()), op_(op), dtype_(spec.outputs[0].dtype),
        shape_(spec.outputs[0].shape.empty() ? std::vector<int64_t>{1} : spec.outputs[0].shape),
        sa_(broadcastStrides(spec.inputs[0].shape, shape_)),
        sb_(broadcastStrides(spec.inputs[1].shape, shape_)) {}

  Status run(const KernelArgs &args) override {
    if (dtype_ == ir::DType::kFloat32)
      return loop<float>(args);
    return loop<int64_t>(args);
  }

private:
  template <typename T> Status loop(const KernelArgs &args) {
    const T *a = static_cast<const T *>(args.inputs[0]);
    const T *b = static_cast<const T *>(args.inputs[1]);
    T *out = static_cast<T *>(args.outputs[0]);
    size_t rank = shape_.size();
    int64_t inner = shape_.back();
    int64_t ia0 = sa_.back(), ib0 = sb_.back();
    std::vector<int64_t> idx(rank, 0);
    int64_t outer = 1;
    for (size_t i = 0; i + 1 < rank; ++i)
      outer *= shape_[i];
    int64_t o = 0;
    for (int64_t r = 0; r < outer; ++r) {
      int64_t ia = 0, ib = 0;
      for (size_t d = 0; d + 1 < rank; ++d) {
        ia += idx[d] * sa_[d];
        ib += idx[d] * sb_[d];
      }
      for (int64_t j = 0; j < inner; ++j, ++o) {
        T x = a[ia + j * ia0], y = b[ib + j * ib0];
        if constexpr (std::is_same_v<T, float>) {
          out[o] = apply(x, y);
        } else {
          if (op_ == BinOp::kDiv && y == 0)
            return Status::error(where_, "integer division by zero");
          out[o] = applyInt(x, y);
        }
      }
      for (size_t d = rank - 1; d-- > 0;) {
        if (++idx[d] < shape_[d])
          break;
        idx[d] = 0;
      }
    }
    return Status::ok();
  }

  float apply(float x, float y) const {
    switch (op_) {
    case BinOp::kAdd:
      return x + y;
    case BinOp::kSub:
      return x - y;
    case BinOp::kMul:
      return x * y;
    case BinOp::kDiv:
      return x / y;
    }
    return 0.f;
  }

  int64_t applyInt(int64_t x, int64_t y) const {
    using U = uint64_t;
    switch (op_) {
    case BinOp::kAdd:
      return static_cast<int64_t>(U(x) + U(y));
    case BinOp::kSub:
      return static_cast<int64_t>(U(x) - U(y));
    case BinOp::kMul:
      return static_cast<int64_t>(U(x) * U(y));
    case BinOp::kDiv:
      if (x == std::numeric_limits<int64_t>::min() && y == -1)
        return x;
      return x / y;
    }
    return 0;
  }

  std::string where_;
  BinOp op_;
  ir::DType dtype_;
  std::vector<int64_t> shape_, sa_, sb_;
};

/// Which operand is oneDNN's src0 (the one with the output's shape), or -1 for the loop.
int onednnSrc0(const KernelSpec &spec) {
  if (spec.outputs[0].dtype != ir::DType::kFloat32)
    return -1;
  const auto &out = spec.outputs[0].shape;
  if (spec.inputs[0].shape == out)
    return 0;
  if (commutative(binOp(spec.op)) && spec.inputs[1].shape == out)
    return 1;
  return -1;
}

} // namespace

Status checkBinary(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  const std::vector<ir::DType> kTypes = {ir::DType::kFloat32, ir::DType::kInt64};
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, kTypes));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 1, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[0].dtype}));
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  std::vector<int64_t> out;
  if (!broadcastShapes(spec.inputs[0].shape, spec.inputs[1].shape, out))
    return spec.error("input shapes " + shapeStr(spec.inputs[0].shape) + " and " +
                      shapeStr(spec.inputs[1].shape) + " do not broadcast");
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, out));
  const TensorDesc &a = spec.inputs[0], &b = spec.inputs[1], &y = spec.outputs[0];
  bool anyChannelsLast = a.layout == Layout::kChannelsLast || b.layout == Layout::kChannelsLast ||
                         y.layout == Layout::kChannelsLast;
  if (anyChannelsLast && (a.shape != b.shape || a.layout != b.layout || a.layout != y.layout))
    return spec.error("channels-last operands need one shape and one layout (no broadcasting); "
                      "got " +
                      a.str() + ", " + b.str() + " -> " + y.str());
  return Status::ok();
}

Expected<KernelPtr> createBinary(const KernelSpec &spec, CpuContext &ctx) {
  BinOp op = binOp(spec.op);
  int src0 = onednnSrc0(spec);
  if (src0 < 0)
    return KernelPtr(std::make_unique<BroadcastKernel>(spec, op));
  return buildKernel(spec, [&]() -> KernelPtr {
    const auto &outShape = spec.outputs[0].shape;
    size_t src1 = 1 - static_cast<size_t>(src0);
    dnnl::memory::desc md0 = plainDesc(outShape);
    dnnl::memory::desc md1 = plainDesc(padShape(spec.inputs[src1].shape, outShape.size()));
    dnnl::algorithm alg = op == BinOp::kAdd   ? dnnl::algorithm::binary_add
                          : op == BinOp::kSub ? dnnl::algorithm::binary_sub
                          : op == BinOp::kMul ? dnnl::algorithm::binary_mul
                                              : dnnl::algorithm::binary_div;
    dnnl::binary::desc d(alg, md0, md1, md0);
    dnnl::binary::primitive_desc pd(d, ctx.engine);
    PrimitiveRunner r(dnnl::binary(pd), ctx);
    r.input(DNNL_ARG_SRC_0, md0, static_cast<size_t>(src0));
    r.input(DNNL_ARG_SRC_1, md1, src1);
    r.output(DNNL_ARG_DST, md0, 0);
    return std::make_unique<SinglePrimitiveKernel>(spec, ctx, std::move(r));
  });
}

int inPlaceBinary(const KernelSpec &spec) {
  // oneDNN binary allows dst == src0, and the loop reads element i of an operand with the
  // output's shape before it writes element i of the output.
  const auto &out = spec.outputs[0].shape;
  if (spec.inputs[0].shape == out)
    return 0;
  if (spec.inputs[1].shape == out)
    return 1;
  return -1;
}

} // namespace dtc::ops::cpu
