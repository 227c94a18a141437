// Element-wise reductions of the MPI communicator (MpiCommunicator.cpp): the dtypes it reduces
// and their MPI types, the in-place sum and mean loops, and the ring all-reduce it runs over
// non-blocking point-to-point messages for large buckets. Internal to runtime/comm.
#pragma once

#include "compiler/ir/Types.h"

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace dtc::rt::mpi {

/// Element size and MPI datatype of the dtypes the collectives reduce; nullopt otherwise.
struct DTypeInfo {
  size_t size;
  MPI_Datatype mpi;
  bool floating;
  const char *name;
};
inline std::optional<DTypeInfo> dtypeInfo(ir::DType t) {
  switch (t) {
  case ir::DType::kFloat32:
    return DTypeInfo{4, MPI_FLOAT, true, "f32"};
  case ir::DType::kFloat64:
    return DTypeInfo{8, MPI_DOUBLE, true, "f64"};
  case ir::DType::kInt32:
    return DTypeInfo{4, MPI_INT32_T, false, "i32"};
  case ir::DType::kInt64:
    return DTypeInfo{8, MPI_INT64_T, false, "i64"};
  default:
    return std::nullopt;
  }
}

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
  }
}

/// MPI counts are ints: large buffers go in several calls of at most this many elements.
constexpr size_t kMaxChunk = size_t{1} << 30;

/// d[i] += s[i]; the buffers never overlap (the received chunk is a separate scratch buffer),
/// and saying so lets the compiler vectorize without a run-time alias check.
template <typename T> inline void addArrays(T *__restrict d, const T *__restrict s, size_t count) {
  for (size_t i = 0; i < count; ++i)
    d[i] += s[i];
}

/// dst[i] += src[i] for `count` elements of `dtype`.
inline void addInto(std::byte *dst, const std::byte *src, size_t count, ir::DType dtype) {
  switch (dtype) {
  case ir::DType::kFloat32:
    addArrays(reinterpret_cast<float *>(dst), reinterpret_cast<const float *>(src), count);
    break;
  case ir::DType::kFloat64:
    addArrays(reinterpret_cast<double *>(dst), reinterpret_cast<const double *>(src), count);
    break;
  case ir::DType::kInt32:
    addArrays(reinterpret_cast<int32_t *>(dst), reinterpret_cast<const int32_t *>(src), count);
    break;
  case ir::DType::kInt64:
    addArrays(reinterpret_cast<int64_t *>(dst), reinterpret_cast<const int64_t *>(src), count);
    break;
  default:
    break;
  }
}

/// Ring all-reduce (sum) of `count` elements in place, as in NCCL and Open MPI's tuned ring: the
/// buffer is cut into `size` chunks; size - 1 reduce-scatter rounds (send one chunk to the right
/// neighbour, receive the next from the left and add it), then size - 1 all-gather rounds
/// (forward the reduced chunks). Each rank moves 2 (n - 1) / n of the bytes. Rounds are driven
/// by step() from the polling loop, so the watchdog keeps running.
struct RingState {
  bool active = false;
  std::byte *base = nullptr;
  size_t count = 0, elem = 0;
  MPI_Datatype mt = MPI_BYTE;
  ir::DType dtype = ir::DType::kFloat32;
  int rank = 0, size = 1;
  MPI_Comm comm = MPI_COMM_NULL;
  std::byte *tmp = nullptr;
  int round = 0;       ///< next round to issue, 0 .. 2 (size - 1)
  int pendingAdd = -1; ///< chunk whose received copy in tmp awaits adding

  void begin(std::byte *b, size_t c, size_t e, MPI_Datatype m, ir::DType d, int r, int n,
             MPI_Comm cm, std::vector<std::byte> &scratch) {
    active = true;
    base = b;
    count = c;
    elem = e;
    mt = m;
    dtype = d;
    rank = r;
    size = n;
    comm = cm;
    round = 0;
    pendingAdd = -1;
    scratch.resize(chunkCount(0) * elem); // chunk 0 is the largest
    tmp = scratch.data();
  }
  size_t chunkBegin(int c) const {
    size_t q = count / size, rem = count % size;
    size_t cc = static_cast<size_t>(c);
    return cc * q + std::min(cc, rem);
  }
  size_t chunkCount(int c) const { return chunkBegin(c + 1) - chunkBegin(c); }
  int mod(int x) const { return ((x % size) + size) % size; }

  /// Completes the previous round (adds the received chunk) and issues the next one.
  int step(std::vector<MPI_Request> &reqs) {
    if (pendingAdd >= 0) {
      addInto(base + chunkBegin(pendingAdd) * elem, tmp, chunkCount(pendingAdd), dtype);
      pendingAdd = -1;
    }
    if (round == 2 * (size - 1)) {
      active = false;
      return MPI_SUCCESS;
    }
    const int right = mod(rank + 1), left = mod(rank - 1);
    int sendChunk, recvChunk;
    bool reduce = round < size - 1;
    if (reduce) {
      sendChunk = mod(rank - round);
      recvChunk = mod(rank - round - 1);
    } else {
      int s = round - (size - 1);
      sendChunk = mod(rank + 1 - s);
      recvChunk = mod(rank - s);
    }
    std::byte *recvTo = reduce ? tmp : base + chunkBegin(recvChunk) * elem;
    reqs.resize(2);
    int rc =
        MPI_Irecv(recvTo, static_cast<int>(chunkCount(recvChunk)), mt, left, round, comm, &reqs[0]);
    if (rc != MPI_SUCCESS)
      return rc;
    rc = MPI_Isend(base + chunkBegin(sendChunk) * elem, static_cast<int>(chunkCount(sendChunk)), mt,
                   right, round, comm, &reqs[1]);
    if (reduce)
      pendingAdd = recvChunk;
    ++round;
    return rc;
  }
};

} // namespace dtc::rt::mpi
