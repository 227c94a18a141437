// Index math of the CUDA data-movement kernels (ops/cuda/Data.cu, Index.cu, Generate.cu):
// strided maps between a dense tensor and a strided view of another (Transpose, Slice, Concat,
// Split, Expand, Tile, SliceGrad, DepthToSpace) and when they are plain 2-D copies, three-way
// broadcasting (Where), ONNX Slice clamping and Pad source indices, the GatherND geometry, Cast's
// conversions (bf16 and f16 included), Resize's coordinate transforms and corners, and the Philox
// stream of the dropout masks. The device-side functions are __host__ __device__ and the map
// builders plain C++; none needs a CUDA header, so tests/gpu/DataUtilTest.cpp checks them on the
// CPU against the CPU kernels and their rules (ops/ShapeHelpers.h, ops/cpu/ResizeCoords.h,
// ops/cpu/IndexUtil.h).
#pragma once

#include "compiler/ir/Half.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#ifdef __CUDACC__
#define DTC_HD __host__ __device__
#else
#define DTC_HD
#endif

namespace dtc::ops::cuda {

/// Largest rank the data-movement kernels take (after merging contiguous axes, see coalesce).
constexpr int kDataMaxRank = 8;

/// Element e of a dense row-major tensor of shape dims[0..rank) corresponds to element
/// base + sum_a (c_a % wrap[a] when wrap[a] > 0, else c_a) * strides[a] of another tensor, where
/// (c_0, ..., c_{rank-1}) are e's coordinates. Strides may be 0 (broadcast) or negative
/// (a negative slice step). Rank 0 is a single element at `base`.
struct StridedMap {
  int rank = 0;
  int64_t dims[kDataMaxRank] = {};
  int64_t strides[kDataMaxRank] = {};
  int64_t wrap[kDataMaxRank] = {};
  int64_t base = 0;
};

/// The offset in the strided tensor of dense element `e` (0 <= e < product of dims; every dim
/// is > 0 when the product is).
DTC_HD inline int64_t stridedOffset(const StridedMap &m, int64_t e) {
  int64_t off = m.base;
  for (int a = m.rank - 1; a >= 0; --a) {
    const int64_t d = m.dims[a];
    int64_t c = e % d;
    e /= d;
    if (m.wrap[a] > 0)
      c %= m.wrap[a];
    off += c * m.strides[a];
  }
  return off;
}

/// Merges adjacent axes a, a+1 where the strided side is contiguous across them
/// (strides[a] == strides[a+1] * dims[a+1], no wrap) and drops axes of size 1; the offsets the
/// map gives are unchanged. Fewer axes mean fewer divisions per element.
DTC_HD inline void coalesce(StridedMap &m) {
  StridedMap r;
  r.base = m.base;
  for (int a = 0; a < m.rank; ++a) {
    if (m.dims[a] == 1)
      continue;
    if (r.rank > 0 && m.wrap[a] == 0 && r.wrap[r.rank - 1] == 0 &&
        r.strides[r.rank - 1] == m.strides[a] * m.dims[a]) {
      r.dims[r.rank - 1] *= m.dims[a];
      r.strides[r.rank - 1] = m.strides[a];
      continue;
    }
    r.dims[r.rank] = m.dims[a];
    r.strides[r.rank] = m.strides[a];
    r.wrap[r.rank] = m.wrap[a];
    ++r.rank;
  }
  m = r;
}

/// Three operands broadcast to one output (Where: condition, x, y): output element e reads
/// element sum_a c_a * strides[k][a] of operand k (stride 0 on broadcast axes).
struct Broadcast3 {
  int rank = 0;
  int64_t dims[kDataMaxRank] = {};
  int64_t strides[3][kDataMaxRank] = {};
};

/// The three operand offsets of output element `e`.
DTC_HD inline void broadcastOffsets(const Broadcast3 &m, int64_t e, int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int a = m.rank - 1; a >= 0; --a) {
    const int64_t d = m.dims[a];
    const int64_t c = e % d;
    e /= d;
    off[0] += c * m.strides[0][a];
    off[1] += c * m.strides[1][a];
    off[2] += c * m.strides[2][a];
  }
}

/// Merges adjacent axes contiguous in all three operands (and drops axes of size 1).
DTC_HD inline void coalesce(Broadcast3 &m) {
  Broadcast3 r;
  for (int a = 0; a < m.rank; ++a) {
    if (m.dims[a] == 1)
      continue;
    bool merge = r.rank > 0;
    for (int k = 0; merge && k < 3; ++k)
      merge = r.strides[k][r.rank - 1] == m.strides[k][a] * m.dims[a];
    if (merge) {
      r.dims[r.rank - 1] *= m.dims[a];
      for (int k = 0; k < 3; ++k)
        r.strides[k][r.rank - 1] = m.strides[k][a];
      continue;
    }
    r.dims[r.rank] = m.dims[a];
    for (int k = 0; k < 3; ++k)
      r.strides[k][r.rank] = m.strides[k][a];
    ++r.rank;
  }
  m = r;
}

/// ONNX Slice-13 clamping of one axis of size `dim` for a non-zero `step` (the rule of
/// ops::clampSlice in ops/ShapeHelpers.h): `first` is the first index taken, `count` how many.
DTC_HD inline void sliceClamp(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t &first,
                              int64_t &count) {
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = start < 0 ? 0 : (start > dim ? dim : start);
    end = end < 0 ? 0 : (end > dim ? dim : end);
    first = start;
    count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    // max first, then min (as std::min(std::max(...))): an empty axis gives start -1.
    start = start < 0 ? 0 : start;
    start = start > dim - 1 ? dim - 1 : start;
    end = end < -1 ? -1 : end;
    end = end > dim - 1 ? dim - 1 : end;
    first = start;
    const uint64_t s = step == INT64_MIN ? uint64_t{1} << 63 : static_cast<uint64_t>(-step);
    count = start > end ? static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / s) + 1 : 0;
  }
}

/// The inputs of one Slice run, widened to int64: starts, ends, axes (null: 0, 1, ...) and
/// steps (null: all 1), n entries each.
struct SliceArgs {
  const int64_t *starts;
  const int64_t *ends;
  const int64_t *axes;
  const int64_t *steps;
  int64_t n;
};

/// Slice's gather map (output dense, input strided) for an input of shape in[0..rank) and the
/// plan's output shape out[0..rank). Returns 0 when the run's starts/ends/axes/steps give
/// exactly `out`; otherwise 1 (an axis out of range or repeated, a zero step, or a different
/// output shape) and the map of the slice starting at 0 with step 1 (always inside the input,
/// as out[a] <= in[a]), so a kernel that reports the error still reads only valid memory.
DTC_HD inline int sliceMap(const int64_t *in, const int64_t *out, int rank, const SliceArgs &s,
                           StridedMap &m) {
  int64_t first[kDataMaxRank], step[kDataMaxRank], count[kDataMaxRank];
  for (int a = 0; a < rank; ++a) {
    first[a] = 0;
    step[a] = 1;
    count[a] = in[a];
  }
  bool seen[kDataMaxRank] = {};
  int bad = s.n > rank ? 1 : 0;
  for (int64_t i = 0; !bad && i < s.n; ++i) {
    int64_t a = s.axes ? s.axes[i] : i;
    if (a < 0)
      a += rank;
    const int64_t st = s.steps ? s.steps[i] : 1;
    if (a < 0 || a >= rank || seen[a] || st == 0) {
      bad = 1;
      break;
    }
    seen[a] = true;
    sliceClamp(in[a], s.starts[i], s.ends[i], st, first[a], count[a]);
    step[a] = st;
  }
  for (int a = 0; !bad && a < rank; ++a)
    bad = count[a] != out[a];
  m = StridedMap();
  m.rank = rank;
  int64_t stride = 1;
  for (int a = rank - 1; a >= 0; --a) {
    m.dims[a] = out[a];
    m.strides[a] = bad ? stride : step[a] * stride;
    m.base += bad ? 0 : first[a] * stride;
    stride *= in[a];
  }
  return bad;
}

/// The geometry of GatherND, GatherNDGrad and ScatterND (the CPU's GatherNDGeometry,
/// ops/cpu/IndexUtil.h): `tuples` index tuples of `m` int64 indices each select a contiguous
/// slice of `slice` elements; tuple t belongs to batch t / groups of `batchSize` elements.
struct NDGeometry {
  int64_t batchDims = 0, m = 0, groups = 1, tuples = 0, slice = 1, batchSize = 1;
  int64_t dataShape[kDataMaxRank] = {};
};

/// Element offset into data of tuple t (its m indices at `tuple`, negative from the back), or -1
/// when an index is out of range.
DTC_HD inline int64_t ndOffset(const NDGeometry &g, int64_t t, const int64_t *tuple) {
  int64_t off = (t / g.groups) * g.batchSize, stride = g.batchSize;
  for (int64_t k = 0; k < g.m; ++k) {
    const int64_t s = g.dataShape[g.batchDims + k];
    if (s <= 0) // an empty axis: no index is in range
      return -1;
    stride /= s;
    const int64_t v = tuple[k];
    if (v < -s || v >= s)
      return -1;
    off += (v < 0 ? v + s : v) * stride;
  }
  return off;
}

/// Pad modes (ONNX Pad-19).
enum class PadMode : int { kConstant, kEdge, kReflect, kWrap };

/// The source index along an axis of size `dim` for padded coordinate `x` (relative to the first
/// input element), or -1 for the padding value: the rule of ops::padSourceIndex.
DTC_HD inline int64_t padSource(int64_t x, int64_t dim, PadMode mode) {
  if (x >= 0 && x < dim)
    return x;
  if (mode == PadMode::kConstant || dim == 0)
    return -1;
  if (mode == PadMode::kEdge)
    return x < 0 ? 0 : dim - 1;
  if (mode == PadMode::kWrap)
    return ((x % dim) + dim) % dim;
  if (dim == 1)
    return 0;
  const int64_t period = 2 * (dim - 1);
  const int64_t r = ((x % period) + period) % period;
  return r < dim ? r : period - r;
}

/// Cast's conversions (ops/cpu/Cast.cpp): float -> integer truncates toward zero, NaN gives 0
/// and values outside the integer's range saturate to its min or max; integer -> integer wraps;
/// anything -> bool is x != 0 (NaN -> true); bool -> number is 0 or 1. Bool is stored as one
/// byte (BoolByte) so it is told apart from uint8.
struct BoolByte {
  uint8_t v;
};

/// Storage of a bfloat16 and of an IEEE binary16 element (mixed precision's Casts).
struct BF16Bits {
  uint16_t bits;
};
struct F16Bits {
  uint16_t bits;
};

DTC_HD inline uint32_t floatBits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
}
DTC_HD inline float bitsFloat(uint32_t x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}

template <typename T> struct IntLimits;
template <> struct IntLimits<int8_t> {
  static constexpr double kLo = -128.0, kHiExcl = 128.0;
  static constexpr int8_t kMin = -128, kMax = 127;
};
template <> struct IntLimits<uint8_t> {
  static constexpr double kLo = 0.0, kHiExcl = 256.0;
  static constexpr uint8_t kMin = 0, kMax = 255;
};
template <> struct IntLimits<int32_t> {
  static constexpr double kLo = -2147483648.0, kHiExcl = 2147483648.0;
  static constexpr int32_t kMin = INT32_MIN, kMax = INT32_MAX;
};
template <> struct IntLimits<int64_t> {
  static constexpr double kLo = -9223372036854775808.0, kHiExcl = 9223372036854775808.0;
  static constexpr int64_t kMin = INT64_MIN, kMax = INT64_MAX;
};

template <typename A, typename B> struct IsSame { static constexpr bool value = false; };
template <typename A> struct IsSame<A, A> { static constexpr bool value = true; };

template <typename T> struct IsFloat { static constexpr bool value = false; };
template <> struct IsFloat<float> { static constexpr bool value = true; };
template <> struct IsFloat<double> { static constexpr bool value = true; };

template <typename From, typename To> DTC_HD inline To castValue(From v) {
  // bf16 and f16 convert through f32, as the CPU kernel does (ops/cpu/Cast.cpp).
  if constexpr (IsSame<From, BF16Bits>::value) {
    return castValue<float, To>(ir::bfloat16ToFloat(v.bits));
  } else if constexpr (IsSame<From, F16Bits>::value) {
    return castValue<float, To>(ir::halfToFloat(v.bits));
  } else if constexpr (IsSame<To, BF16Bits>::value) {
    return BF16Bits{ir::floatToBFloat16(castValue<From, float>(v))};
  } else if constexpr (IsSame<To, F16Bits>::value) {
    return F16Bits{ir::floatToHalf(castValue<From, float>(v))};
  } else if constexpr (IsSame<From, BoolByte>::value) {
    return castValue<uint8_t, To>(static_cast<uint8_t>(v.v != 0 ? 1 : 0));
  } else if constexpr (IsSame<To, BoolByte>::value) {
    return BoolByte{static_cast<uint8_t>(v != From(0) ? 1 : 0)};
  } else if constexpr (IsFloat<From>::value && !IsFloat<To>::value) {
    const double d = static_cast<double>(v);
    if (d != d)
      return To(0);
    if (d <= IntLimits<To>::kLo)
      return IntLimits<To>::kMin;
    if (d >= IntLimits<To>::kHiExcl)
      return IntLimits<To>::kMax;
    return static_cast<To>(d);
  } else {
    return static_cast<To>(v);
  }
}

/// Resize's coordinate transforms and nearest rounding (ops/cpu/ResizeCoords.h).
enum class ResizeTransformMode : int {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn
};
enum class ResizeNearestMode : int { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

/// One output index's sources along an axis: out = (1 - w) * in[i0] + w * in[i1] (nearest:
/// i0 == i1, w == 0).
struct ResizeTap {
  int64_t i0, i1;
  float w;
};

/// The sources of output index x along an axis of length inLen resized to outLen with scale s,
/// exactly as ops::cpu::resizeAxisMap computes them (double coordinates, edge clamping). The
/// kernels that call it are compiled without FMA contraction (data.cmake) so that the
/// coordinates match the CPU's bit for bit.
DTC_HD inline ResizeTap resizeTap(bool linear, ResizeTransformMode t, ResizeNearestMode rounding,
                                  int64_t inLen, int64_t outLen, double s, int64_t x) {
  const double xr = static_cast<double>(x);
  double xo = xr;
  switch (t) {
  case ResizeTransformMode::kHalfPixel:
    xo = (xr + 0.5) / s - 0.5;
    break;
  case ResizeTransformMode::kHalfPixelSymmetric: {
    const double adjustment = static_cast<double>(outLen) / (s * static_cast<double>(inLen));
    const double center = static_cast<double>(inLen) / 2;
    xo = center * (1 - adjustment) + (xr + 0.5) / s - 0.5;
    break;
  }
  case ResizeTransformMode::kPytorchHalfPixel:
    xo = outLen > 1 ? (xr + 0.5) / s - 0.5 : 0.0;
    break;
  case ResizeTransformMode::kAlignCorners:
    xo = outLen == 1 ? 0.0 : xr * static_cast<double>(inLen - 1) / static_cast<double>(outLen - 1);
    break;
  case ResizeTransformMode::kAsymmetric:
    xo = xr / s;
    break;
  case ResizeTransformMode::kTfHalfPixelForNn:
    xo = (xr + 0.5) / s;
    break;
  }
  const double f = floor(xo), r = xo - f;
  auto clampIndex = [inLen](double v) -> int64_t {
    return v <= 0 ? int64_t(0)
                  : (v >= static_cast<double>(inLen - 1) ? inLen - 1 : static_cast<int64_t>(v));
  };
  ResizeTap tap;
  tap.w = 0.0f;
  if (linear) {
    tap.i0 = clampIndex(f);
    tap.i1 = clampIndex(f + 1);
    tap.w = static_cast<float>(r);
    if (tap.i0 == tap.i1)
      tap.w = 0.0f;
  } else {
    bool up = false;
    if (r != 0.0) {
      switch (rounding) {
      case ResizeNearestMode::kRoundPreferFloor:
        up = r > 0.5;
        break;
      case ResizeNearestMode::kRoundPreferCeil:
        up = r >= 0.5;
        break;
      case ResizeNearestMode::kFloor:
        up = false;
        break;
      case ResizeNearestMode::kCeil:
        up = true;
        break;
      }
    }
    tap.i0 = tap.i1 = clampIndex(up ? f + 1 : f);
  }
  return tap;
}

/// The static description of a Resize (or ResizeGrad) for the kernels: shapes and per-axis
/// scale (1 on axes that are not resized).
struct ResizeGeometry {
  int rank = 0;
  bool linear = false;
  ResizeTransformMode transform = ResizeTransformMode::kHalfPixel;
  ResizeNearestMode rounding = ResizeNearestMode::kRoundPreferFloor;
  int64_t in[kDataMaxRank] = {};
  int64_t out[kDataMaxRank] = {};
  double scale[kDataMaxRank] = {};
};

/// At most this many axes of one Resize may carry fractional linear weights (16 corners per
/// output element); the checks reject more resized axes, and a run whose scales give more
/// reports an error.
constexpr int kResizeLinearMax = 4;

/// Output element e of a resize: its (input offset, weight) corners, written to off/weight
/// (capacity 1 << kResizeLinearMax); returns how many, or -1 when more than kResizeLinearMax
/// axes have fractional weights. Axes with a zero weight contribute one source, so a bilinear
/// 2-D resize gives at most 4 corners and nearest always 1.
DTC_HD inline int resizeCorners(const ResizeGeometry &g, int64_t e, int64_t *off, float *weight) {
  off[0] = 0;
  weight[0] = 1.0f;
  int n = 1, split = 0;
  int64_t stride = 1;
  for (int a = g.rank - 1; a >= 0; --a) {
    const int64_t x = e % g.out[a];
    e /= g.out[a];
    const ResizeTap t =
        resizeTap(g.linear, g.transform, g.rounding, g.in[a], g.out[a], g.scale[a], x);
    if (t.w != 0.0f) {
      if (++split > kResizeLinearMax)
        return -1;
      for (int k = 0; k < n; ++k) {
        off[n + k] = off[k] + t.i1 * stride;
        weight[n + k] = weight[k] * t.w;
        off[k] += t.i0 * stride;
        weight[k] *= 1.0f - t.w;
      }
      n *= 2;
    } else {
      for (int k = 0; k < n; ++k)
        off[k] += t.i0 * stride;
    }
    stride *= g.in[a];
  }
  return n;
}

/// Philox4x32-10 (Salmon et al., SC 2011; Random123's constants and round function): the four
/// 32-bit words of counter block ctr[0..4) under key[0..2), written to out[0..4). The rule of the
/// CPU's DropoutTraining (ops/cpu/ActivationGradDropout.cpp), so masks match bit for bit.
DTC_HD inline void philox4x32x10(const uint32_t ctrIn[4], const uint32_t keyIn[2],
                                 uint32_t out[4]) {
  const uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  const uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = ctrIn[0], c1 = ctrIn[1], c2 = ctrIn[2], c3 = ctrIn[3];
  uint32_t k0 = keyIn[0], k1 = keyIn[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint64_t p0 = kM0 * c0, p1 = kM1 * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/// DropoutTraining's keep decisions for elements 4b .. 4b+3 from rng = {seed, step, rank} and
/// the node's stream attribute: keep[l] = word l >= threshold (threshold = floor(ratio * 2^32)).
DTC_HD inline void dropoutKeep(int64_t b, uint64_t seed, uint32_t step, uint32_t rank,
                               uint32_t stream, uint64_t threshold, bool keep[4]) {
  const uint64_t ub = static_cast<uint64_t>(b);
  const uint32_t ctr[4] = {static_cast<uint32_t>(ub), static_cast<uint32_t>(ub >> 32), stream,
                           step};
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32) ^ rank};
  uint32_t u[4];
  philox4x32x10(ctr, key, u);
  for (int l = 0; l < 4; ++l)
    keep[l] = u[l] >= threshold;
}

// ---- host-side map builders (used when a kernel is made, and by the tests) ---------------------

/// Row-major strides (in elements) of `shape`.
inline std::vector<int64_t> denseStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t a = shape.size(); a-- > 1;)
    s[a - 1] = s[a] * shape[a];
  return s;
}

/// A strided map over `dims` (the dense side, rank <= kDataMaxRank) with `strides` into the
/// other side, not coalesced.
inline StridedMap makeStridedMap(const std::vector<int64_t> &dims,
                                 const std::vector<int64_t> &strides, int64_t base = 0) {
  StridedMap m;
  m.rank = static_cast<int>(dims.size());
  for (size_t a = 0; a < dims.size(); ++a) {
    m.dims[a] = dims[a];
    m.strides[a] = strides[a];
  }
  m.base = base;
  return m;
}

/// Transpose of `in` by `perm`: the dense output reads input offset stridedOffset(map, e).
inline StridedMap transposeMap(const std::vector<int64_t> &in, const std::vector<int64_t> &perm) {
  const std::vector<int64_t> inStrides = denseStrides(in);
  std::vector<int64_t> dims, strides;
  for (int64_t p : perm) {
    dims.push_back(in[static_cast<size_t>(p)]);
    strides.push_back(inStrides[static_cast<size_t>(p)]);
  }
  StridedMap m = makeStridedMap(dims, strides);
  coalesce(m);
  return m;
}

/// A coalesced transpose map that is a batched 2-D transpose: the output [batch, cols, rows]
/// reads the input [batch, rows, cols] (out[b][c][r] = in[b][r][c]). False otherwise.
inline bool batchedTranspose(const StridedMap &m, int64_t &batch, int64_t &rows, int64_t &cols) {
  const int r = m.rank;
  if (r != 2 && r != 3)
    return false;
  const int64_t c = m.dims[r - 2], w = m.dims[r - 1];
  if (m.base != 0 || m.strides[r - 2] != 1 || m.strides[r - 1] != c ||
      (r == 3 && m.strides[0] != w * c))
    return false;
  batch = r == 3 ? m.dims[0] : 1;
  rows = w;
  cols = c;
  return true;
}

/// Expand (numpy broadcasting of `in` to `out`): input axes of size 1 read with stride 0.
inline StridedMap expandMap(const std::vector<int64_t> &in, const std::vector<int64_t> &out) {
  const std::vector<int64_t> inStrides = denseStrides(in);
  std::vector<int64_t> strides(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t a = 0; a < in.size(); ++a)
    strides[lead + a] = in[a] == 1 ? 0 : inStrides[a];
  StridedMap m = makeStridedMap(out, strides);
  coalesce(m);
  return m;
}

/// Tile of `in` to `out` (each out[a] a multiple of in[a]): coordinates wrap at in[a].
inline StridedMap tileMap(const std::vector<int64_t> &in, const std::vector<int64_t> &out) {
  StridedMap m = makeStridedMap(out, denseStrides(in));
  for (size_t a = 0; a < in.size(); ++a)
    m.wrap[a] = in[a] != out[a] ? in[a] : 0;
  coalesce(m);
  return m;
}

/// SliceGrad: the dense dy of shape `counts` scatters to dx (shape `dx`) at
/// starts[a] + k * steps[a] per axis.
inline StridedMap sliceGradMap(const std::vector<int64_t> &counts, const std::vector<int64_t> &dx,
                               const std::vector<int64_t> &starts,
                               const std::vector<int64_t> &steps) {
  const std::vector<int64_t> dxStrides = denseStrides(dx);
  std::vector<int64_t> strides;
  int64_t base = 0;
  for (size_t a = 0; a < dxStrides.size(); ++a) {
    base += starts[a] * dxStrides[a];
    strides.push_back(steps[a] * dxStrides[a]);
  }
  StridedMap m = makeStridedMap(counts, strides, base);
  coalesce(m);
  return m;
}

/// Concat/Split: part i (dense, shape parts[i]) sits in the whole tensor at offset sum of the
/// earlier parts' sizes along `axis` (normalized).
inline std::vector<StridedMap> concatMaps(const std::vector<std::vector<int64_t>> &parts,
                                          const std::vector<int64_t> &whole, int64_t axis) {
  const std::vector<int64_t> strides = denseStrides(whole);
  std::vector<StridedMap> maps;
  int64_t offset = 0;
  for (const std::vector<int64_t> &p : parts) {
    StridedMap m = makeStridedMap(p, strides, offset * strides[static_cast<size_t>(axis)]);
    coalesce(m);
    maps.push_back(m);
    offset += p[static_cast<size_t>(axis)];
  }
  return maps;
}

/// A strided map that is a 2-D copy of `height` rows of `width` bytes: the strided side's rows
/// start `pitch` bytes apart at byte offset `offset`, the dense side's rows are packed
/// (cudaMemcpy2DAsync's form: Concat and Split of contiguous slabs, Slice of whole inner rows).
struct PitchedCopy {
  size_t width = 0, height = 0, pitch = 0, offset = 0;
};

/// True (and `c` set) when a coalesced map of `elem`-byte elements is such a copy: innermost
/// stride 1, no wrap, a non-negative base, rows that do not overlap, and pitches below 2^31
/// (cudaMemcpy2D's limit on every current GPU).
inline bool asPitchedCopy(const StridedMap &m, int64_t elem, PitchedCopy &c) {
  if (m.rank < 1 || m.rank > 2 || m.strides[m.rank - 1] != 1 || m.wrap[0] != 0 ||
      m.wrap[m.rank - 1] != 0 || m.base < 0)
    return false;
  const int64_t inner = m.dims[m.rank - 1];
  const int64_t rowStride = m.rank == 2 ? m.strides[0] : inner;
  if (rowStride < inner || rowStride * elem >= (int64_t{1} << 31))
    return false;
  c.width = static_cast<size_t>(inner * elem);
  c.height = static_cast<size_t>(m.rank == 2 ? m.dims[0] : 1);
  c.pitch = static_cast<size_t>(rowStride * elem);
  c.offset = static_cast<size_t>(m.base * elem);
  return true;
}

/// The NDGeometry of data shape `data` and indices shape `indices` with `batchDims` leading batch
/// axes (shapes already validated by the CPU check: m in [1, rank - batchDims]).
inline NDGeometry ndGeometry(const std::vector<int64_t> &data, const std::vector<int64_t> &indices,
                             int64_t batchDims) {
  NDGeometry g;
  g.batchDims = batchDims;
  g.m = indices.back();
  for (size_t k = 0; k < data.size(); ++k)
    g.dataShape[k] = data[k];
  int64_t batches = 1;
  for (int64_t k = 0; k < batchDims; ++k)
    batches *= data[static_cast<size_t>(k)];
  for (size_t k = static_cast<size_t>(batchDims); k + 1 < indices.size(); ++k)
    g.groups *= indices[k];
  for (size_t k = static_cast<size_t>(batchDims + g.m); k < data.size(); ++k)
    g.slice *= data[k];
  for (size_t k = static_cast<size_t>(batchDims); k < data.size(); ++k)
    g.batchSize *= data[k];
  g.tuples = batches * g.groups;
  return g;
}

/// Where: three operand shapes broadcast (numpy, trailing axes aligned) to `out`.
inline Broadcast3 broadcast3Map(const std::vector<int64_t> shapes[3],
                                const std::vector<int64_t> &out) {
  Broadcast3 m;
  m.rank = static_cast<int>(out.size());
  for (size_t a = 0; a < out.size(); ++a)
    m.dims[a] = out[a];
  for (int k = 0; k < 3; ++k) {
    const std::vector<int64_t> &s = shapes[k];
    const std::vector<int64_t> strides = denseStrides(s);
    const size_t lead = out.size() - s.size();
    for (size_t a = 0; a < s.size(); ++a)
      m.strides[k][lead + a] = s[a] == 1 ? 0 : strides[a];
  }
  coalesce(m);
  return m;
}

#ifdef __CUDACC__
// ---- device-side helpers of the .cu files (not seen by the pure C++ checks and tests) ----------

/// Threads per block of the grid-stride kernels.
constexpr int kDataBlock = 256;

/// Blocks for n elements (grid-stride loops cover the rest); n > 0.
inline unsigned dataGrid(int64_t n) {
  const int64_t blocks = (n + kDataBlock - 1) / kDataBlock;
  return static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20));
}

/// First element of this thread and the grid's stride, in int64.
__device__ inline int64_t gridStart() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t gridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

/// Element i of an int32 (is64 false) or int64 index tensor.
__device__ inline int64_t loadIndex(const void *p, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t *>(p)[i]
              : static_cast<int64_t>(static_cast<const int32_t *>(p)[i]);
}

/// Records error site `site` in the context's slot unless an earlier error is there.
__device__ inline void reportError(int *slot, int site) { atomicCAS(slot, 0, site); }
#endif

} // namespace dtc::ops::cuda
