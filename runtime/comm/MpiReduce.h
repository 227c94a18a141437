// Element types of the MPI communicator (MpiCommunicator.cpp): the dtypes its reductions take,
// their MPI datatypes, the mean scaling loop, and the f16/bf16 sum, which MPI has no type for
// (a user-defined MPI operation over MPI_UINT16_T that adds in f32). Internal to runtime/comm.
#pragma once

#include "compiler/ir/Types.h"

#include "compiler/ir/Half.h"

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

namespace dtc::rt::mpi {

using ir::bfloat16ToFloat;
using ir::floatToBFloat16;
using ir::floatToHalf;
using ir::halfToFloat;

/// MPI counts are ints: large buffers go in several calls of at most this many elements.
constexpr size_t kMaxChunk = size_t{1} << 30;

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
    b[i] = floatToBFloat16(bfloat16ToFloat(a[i]) + bfloat16ToFloat(b[i]));
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
  MPI_Op sum; ///< the reduction: the sum, or MPI_MAX for ReduceOp::kMax (MpiRequests.cpp)
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
      p[i] = h ? floatToHalf(halfToFloat(p[i]) / d) : floatToBFloat16(bfloat16ToFloat(p[i]) / d);
  }
}

} // namespace dtc::rt::mpi
