// Element types of the MPI communicator (MpiCommunicator.cpp): the dtypes its reductions take,
// their MPI datatypes, the mean scaling loop, and the f16/bf16 sum, which MPI has no type for
// (a user-defined MPI operation over MPI_UINT16_T that adds in f32). Internal to runtime/comm.
#pragma once

#include "compiler/ir/Types.h"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace dtc::rt::mpi {

/// MPI counts are ints: large buffers go in several calls of at most this many elements.
constexpr size_t kMaxChunk = size_t{1} << 30;

/// IEEE binary16 -> float (exact).
inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13); // inf, NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { // subnormal: normalize
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// float -> IEEE binary16, round to nearest even; overflow gives infinity, NaN stays NaN.
inline uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u) // rounds to >= 65520: infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absx < 0x38800000u) { // below the smallest normal half (2^-14): subnormal or zero
    if (absx < 0x33000000u) // below half the smallest subnormal (2^-25): zero
      return sign;
    const uint32_t e = absx >> 23, man = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e; // 14..24
    uint32_t v = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (v & 1u)))
      ++v;
    return static_cast<uint16_t>(sign | v);
  }
  uint32_t v = ((absx >> 13) - (112u << 10)) & 0xffffu; // rebias the exponent
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (v & 1u)))
    ++v; // a carry into the exponent is correct rounding
  return static_cast<uint16_t>(sign | v);
}

inline float bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// float -> bfloat16, round to nearest even; NaN stays NaN.
inline uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

/// MPI_User_function: inout[i] = in[i] + inout[i] in f32, rounded back to f16 / bf16. MPI may
/// combine partial sums in any order (both operations are declared commutative).
inline void sumHalf(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = floatToHalf(halfToFloat(a[i]) + halfToFloat(b[i]));
}
inline void sumBf16(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = floatToBf16(bf16ToFloat(a[i]) + bf16ToFloat(b[i]));
}

/// The 16-bit float sums as MPI operations, created once after MPI_Init (MPI_Op_create) and
/// freed before MPI_Finalize.
struct HalfOps {
  MPI_Op f16 = MPI_OP_NULL;
  MPI_Op bf16 = MPI_OP_NULL;
};

/// Element size, MPI datatype and sum operation of the dtypes the reductions take; nullopt
/// otherwise. f16 and bf16 travel as MPI_UINT16_T and are summed by `half`'s operations.
struct DTypeInfo {
  size_t size;
  MPI_Datatype mpi;
  MPI_Op sum;
  bool floating;
  const char *name;
};
inline std::optional<DTypeInfo> dtypeInfo(ir::DType t, const HalfOps &half) {
  switch (t) {
  case ir::DType::kFloat32:
    return DTypeInfo{4, MPI_FLOAT, MPI_SUM, true, "f32"};
  case ir::DType::kFloat64:
    return DTypeInfo{8, MPI_DOUBLE, MPI_SUM, true, "f64"};
  case ir::DType::kInt32:
    return DTypeInfo{4, MPI_INT32_T, MPI_SUM, false, "i32"};
  case ir::DType::kInt64:
    return DTypeInfo{8, MPI_INT64_T, MPI_SUM, false, "i64"};
  case ir::DType::kFloat16:
    return DTypeInfo{2, MPI_UINT16_T, half.f16, true, "f16"};
  case ir::DType::kBFloat16:
    return DTypeInfo{2, MPI_UINT16_T, half.bf16, true, "bf16"};
  default:
    return std::nullopt;
  }
}

/// data[i] /= n for `count` elements of a floating dtype (the mean of a sum over n ranks; f32
/// multiplies by 1/n, f16/bf16 divide in f32 and round once).
inline void divideBy(void *data, size_t count, ir::DType t, int n) {
  if (t == ir::DType::kFloat32) {
    float *p = static_cast<float *>(data);
    const float s = 1.0f / static_cast<float>(n);
    for (size_t i = 0; i < count; ++i)
      p[i] *= s;
  } else if (t == ir::DType::kFloat64) {
    double *p = static_cast<double *>(data);
    const double d = static_cast<double>(n);
    for (size_t i = 0; i < count; ++i)
      p[i] /= d;
  } else if (t == ir::DType::kFloat16 || t == ir::DType::kBFloat16) {
    uint16_t *p = static_cast<uint16_t *>(data);
    const float d = static_cast<float>(n);
    const bool h = t == ir::DType::kFloat16;
    for (size_t i = 0; i < count; ++i)
      p[i] = h ? floatToHalf(halfToFloat(p[i]) / d) : floatToBf16(bf16ToFloat(p[i]) / d);
  }
}

} // namespace dtc::rt::mpi
