// CPU kernels of Cast and CastLike between f32, f64, f16, bf16, i32, i64, i8, u8 and bool (Cast's
// `to`, or CastLike's input 1's dtype, names the target; the Cast-19 `saturate` attribute only
// concerns float8 types and is ignored). Conversions follow numpy's astype where it is defined:
// float -> integer truncates toward zero, integer -> integer wraps (two's complement), anything ->
// bool is x != 0 (NaN -> true), bool -> number is 0 or 1. Where C++ and numpy leave it undefined,
// dtc defines it: float NaN -> integer 0, and float values (including +-inf) outside the integer
// type's range saturate to its min or max. f64 -> f32 rounds to nearest (out of range -> +-inf).
// Elementwise: runs in place when the two element sizes are equal. f16 and bf16 convert
// through f32: to them rounds to nearest even (compiler/ir/Half.h; f16 overflows to +-inf, NaN
// stays NaN), from them is exact; f64 -> f16/bf16 rounds twice (f64 -> f32 -> 16 bits).
#include "compiler/ir/Half.h"
#include "ops/cpu/BroadcastUtil.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace dtc::ops::cpu {

namespace {

/// Storage type of a bool element: one byte, 0 or 1 (any nonzero byte reads as true).
struct BoolByte {
  uint8_t v;
};

/// Storage types of a bfloat16 and an IEEE binary16 element.
struct BF16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

template <typename From, typename To> To convert(From v) {
  if constexpr (std::is_same_v<From, BF16>) {
    return convert<float, To>(ir::bfloat16ToFloat(v.bits));
  } else if constexpr (std::is_same_v<From, F16>) {
    return convert<float, To>(ir::halfToFloat(v.bits));
  } else if constexpr (std::is_same_v<To, BF16>) {
    return BF16{ir::floatToBFloat16(convert<From, float>(v))};
  } else if constexpr (std::is_same_v<To, F16>) {
    return F16{ir::floatToHalf(convert<From, float>(v))};
  } else if constexpr (std::is_same_v<From, BoolByte>) {
    return convert<uint8_t, To>(v.v != 0 ? 1 : 0);
  } else if constexpr (std::is_same_v<To, BoolByte>) {
    return BoolByte{static_cast<uint8_t>(v != 0 ? 1 : 0)};
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    double d = static_cast<double>(v);
    if (std::isnan(d))
      return 0;
    // Exact powers of two in double: the lowest value and one past the highest.
    constexpr double kLo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double kHiExcl =
        std::is_signed_v<To> ? -kLo
                             : 2.0 * static_cast<double>(std::numeric_limits<To>::max() / 2 + 1);
    if (d <= kLo)
      return std::numeric_limits<To>::min();
    if (d >= kHiExcl)
      return std::numeric_limits<To>::max();
    return static_cast<To>(d); // truncates toward zero, in range
  } else {
    return static_cast<To>(v);
  }
}

template <typename From, typename To> void castLoop(const void *in, void *out, int64_t n) {
  const From *x = static_cast<const From *>(in);
  To *y = static_cast<To *>(out);
  for (int64_t i = 0; i < n; ++i)
    y[i] = convert<From, To>(x[i]);
}

template <typename T> struct Tag { using type = T; };

/// Calls fn(Tag<T>) for the storage type T of `t` (one of the supported dtypes).
template <typename Fn> void withType(ir::DType t, Fn &&fn) {
  switch (t) {
  case ir::DType::kFloat32:
    return fn(Tag<float>{});
  case ir::DType::kFloat64:
    return fn(Tag<double>{});
  case ir::DType::kInt32:
    return fn(Tag<int32_t>{});
  case ir::DType::kInt64:
    return fn(Tag<int64_t>{});
  case ir::DType::kInt8:
    return fn(Tag<int8_t>{});
  case ir::DType::kUInt8:
    return fn(Tag<uint8_t>{});
  case ir::DType::kBFloat16:
    return fn(Tag<BF16>{});
  case ir::DType::kFloat16:
    return fn(Tag<F16>{});
  default:
    return fn(Tag<BoolByte>{});
  }
}

const std::vector<ir::DType> kCastTypes = {
    ir::DType::kFloat32, ir::DType::kFloat64,  ir::DType::kInt32,
    ir::DType::kInt64,   ir::DType::kInt8,     ir::DType::kUInt8,
    ir::DType::kBool,    ir::DType::kBFloat16, ir::DType::kFloat16};

class CastKernel : public Kernel {
public:
  explicit CastKernel(const KernelSpec &spec)
      : from_(spec.inputs[0].dtype), to_(spec.outputs[0].dtype), n_(spec.inputs[0].numElements()) {}

  Status run(const KernelArgs &args) override {
    withType(from_, [&](auto f) {
      withType(to_, [&](auto t) {
        castLoop<typename decltype(f)::type, typename decltype(t)::type>(args.inputs[0],
                                                                         args.outputs[0], n_);
      });
    });
    return Status::ok();
  }

private:
  ir::DType from_, to_;
  int64_t n_;
};

} // namespace

Status checkCast(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 1, 1, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, true, 0, kCastTypes));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, kCastTypes));
  auto it = spec.attrs.find("to");
  if (it != spec.attrs.end()) {
    if (it->second.kind() != ir::AttrKind::kInt)
      return spec.error("attribute 'to' must be an int");
    if (it->second.i() != static_cast<int64_t>(spec.outputs[0].dtype))
      return spec.error("attribute 'to' = " + std::to_string(it->second.i()) +
                        " does not match output 0's dtype " + ir::dtypeName(spec.outputs[0].dtype));
  }
  DTC_RETURN_IF_ERROR(checkShapes(spec));
  DTC_RETURN_IF_ERROR(checkOutputShape(spec, spec.inputs[0].shape));
  return checkFlatLayout(spec);
}

Expected<KernelPtr> createCast(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<CastKernel>(spec));
}

int inPlaceCast(const KernelSpec &spec) {
  // Element i is read before element i is written, at the same byte offset when sizes match.
  return ir::dtypeSize(spec.inputs[0].dtype) == ir::dtypeSize(spec.outputs[0].dtype) ? 0 : -1;
}

} // namespace dtc::ops::cpu

namespace dtc::ops::cpu {

// CastLike: Cast to input 1's dtype (its values are not read), which must be output 0's.
Status checkCastLike(const KernelSpec &spec) {
  DTC_RETURN_IF_ERROR(checkArity(spec, 2, 2, 1));
  DTC_RETURN_IF_ERROR(checkDType(spec, false, 0, {spec.inputs[1].dtype}));
  KernelSpec cast = spec;
  cast.inputs.resize(1);
  return checkCast(cast);
}

Expected<KernelPtr> createCastLike(const KernelSpec &spec, CpuContext &) {
  return KernelPtr(std::make_unique<CastKernel>(spec));
}

int inPlaceCastLike(const KernelSpec &spec) { return inPlaceCast(spec); }

} // namespace dtc::ops::cpu
