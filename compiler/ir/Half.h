// IEEE 754 binary16 and bfloat16 <-> float conversions, shared by constant folding (ops/), the
// CPU kernels, the communicator's half-precision sums (runtime/comm) and, compiled for host and
// device by nvcc, the CUDA kernels (ops/cuda/DataUtil.cuh): round to nearest even, overflow to
// infinity, NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define DTC_HALF_HD __host__ __device__
#else
#define DTC_HALF_HD
#endif

namespace dtc::ir {

/// IEEE binary16 -> float (exact).
DTC_HALF_HD inline float halfToFloat(uint16_t h) {
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
  memcpy(&f, &bits, 4);
  return f;
}

/// float -> IEEE binary16, round to nearest even; overflow gives infinity, NaN stays NaN.
DTC_HALF_HD inline uint16_t floatToHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
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

/// bfloat16 -> float (exact).
DTC_HALF_HD inline float bfloat16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/// float -> bfloat16, round to nearest even; NaN stays NaN.
DTC_HALF_HD inline uint16_t floatToBFloat16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

} // namespace dtc::ir
