// Multi-rank check of the NCCL device communicator (runtime/cuda/NcclCommunicator.h), one GPU per
// rank: `mpirun -n 2 dtc_nccl_check` (tests/gpu/check.sh; any n up to the number of GPUs). Every
// request kind against values computed on the host, a single-member group, a group listed out of
// world order, request errors, an all-reduce bus-bandwidth table (nccl-tests' busbw:
// 2(n-1)/n x bytes / time) from 4 KiB to 256 MiB, dtc's communicator side by side with raw
// ncclAllReduce on the same bytes, and the timeout that aborts the communicators.
// Prints SKIP and exits 0 on a machine with fewer than 2 GPUs (or fewer GPUs than ranks).
#include "ops/cuda/CudaKernel.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cuda/NcclCommunicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using namespace dtc;
using namespace dtc::rt;
using ops::cuda::CudaContext;

namespace {

const char *const kWhere = "nccl_check";

/// Counts value mismatches (infrastructure errors are Statuses).
struct Checker {
  int rank = 0;
  int failures = 0;
  void expect(bool ok, const std::string &what) {
    if (!ok) {
      ++failures;
      std::fprintf(stderr, "FAIL rank %d: %s\n", rank, what.c_str());
    }
  }
  void pass(const char *what) const {
    if (rank == 0)
      std::printf("ok   %s\n", what);
  }
};

/// Device memory of `n` elements of T, freed at the end.
template <typename T> struct DeviceArray {
  ops::cuda::DeviceBuffer buf;
  size_t n = 0;
  T *get() const { return static_cast<T *>(buf.get()); }
  size_t bytes() const { return n * sizeof(T); }
};

template <typename T> Expected<DeviceArray<T>> deviceArray(size_t n) {
  void *p = nullptr;
  DTC_CUDA_RETURN_IF_ERROR(kWhere, cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T)));
  DeviceArray<T> a;
  a.buf.reset(p);
  a.n = n;
  return a;
}

/// Host -> device, complete on return (a pageable cudaMemcpy may return before its DMA ends,
/// and the communication streams do not synchronize with the legacy default stream).
template <typename T> Status upload(T *dev, const std::vector<T> &host) {
  DTC_CUDA_RETURN_IF_ERROR(
      kWhere, cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  DTC_CUDA_RETURN_IF_ERROR(kWhere, cudaDeviceSynchronize());
  return Status::ok();
}

template <typename T> Expected<std::vector<T>> download(const T *dev, size_t n) {
  std::vector<T> host(n);
  DTC_CUDA_RETURN_IF_ERROR(kWhere,
                           cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

/// submit + wait, then the host waits for the compute stream (which waited for the request) and
/// polls: what the executor does at a step's end.
Status runRequest(DeviceCommunicator &dc, CudaContext &ctx, CommRequest r) {
  uint64_t h = dc.submit(std::move(r));
  DTC_RETURN_IF_ERROR(dc.wait(h));
  DTC_CUDA_RETURN_IF_ERROR(kWhere, cudaStreamSynchronize(ctx.stream()));
  return dc.poll();
}

/// Rank r's element i: small multiples of 1/4, so sums and means over a few ranks are exact.
double valueOf(int rank, size_t i) { return (rank + 1) * 0.25 + static_cast<double>(i % 13); }

CommRequest request(CommKind kind, const char *name, int group) {
  CommRequest r;
  r.kind = kind;
  r.name = name;
  r.group = group;
  return r;
}

/// All-reduce sum of four f32 operands: three in place back to back (64-byte aligned, padding
/// between them: one NCCL call) and one out of place from a buffer of its own.
Status checkAllReduceOperands(DeviceCommunicator &dc, CudaContext &ctx, Checker &ck, int n) {
  const int me = ck.rank;
  DTC_ASSIGN_OR_RETURN(auto arena, deviceArray<float>(4096));
  DTC_ASSIGN_OR_RETURN(auto src, deviceArray<float>(1000));
  std::vector<float> a(arena.n), s(src.n);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<float>(valueOf(me, i));
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<float>(valueOf(me, i + 7));
  DTC_RETURN_IF_ERROR(upload(arena.get(), a));
  DTC_RETURN_IF_ERROR(upload(src.get(), s));
  struct Operand {
    size_t at, count;
    const float *in;
  };
  const Operand ops[] = {
      {16, 25, nullptr}, {0, 10, nullptr}, {48, 3, nullptr}, {2048, 1000, src.get()}};
  CommRequest r = request(CommKind::kAllReduce, "operands", 0);
  for (const Operand &o : ops) {
    float *out = arena.get() + o.at;
    r.inputs.push_back(o.in ? static_cast<const void *>(o.in) : out);
    r.outputs.push_back(out);
    r.bytes.push_back(o.count * sizeof(float));
  }
  DTC_RETURN_IF_ERROR(runRequest(dc, ctx, std::move(r)));
  DTC_ASSIGN_OR_RETURN(std::vector<float> got, download(arena.get(), arena.n));
  for (const Operand &o : ops)
    for (size_t i = 0; i < o.count; ++i) {
      double want = 0;
      for (int q = 0; q < n; ++q)
        want += o.in ? valueOf(q, i + 7) : valueOf(q, o.at + i);
      if (got[o.at + i] != static_cast<float>(want)) {
        ck.expect(false, "all-reduce operand at " + std::to_string(o.at) + " element " +
                             std::to_string(i) + ": " + std::to_string(got[o.at + i]) + ", want " +
                             std::to_string(want));
        return Status::ok();
      }
    }
  ck.expect(got[3000] == a[3000], "all-reduce wrote outside its operands");
  ck.pass("all-reduce sum of 4 operands (3 in one span, 1 out of place)");
  return Status::ok();
}

/// All-reduce of one in-place operand of an odd size for one element type.
template <typename T>
Status checkAllReduceType(DeviceCommunicator &dc, CudaContext &ctx, Checker &ck, int n,
                          ir::DType dtype, ReduceOp op, const char *what) {
  const size_t count = 1001;
  DTC_ASSIGN_OR_RETURN(auto buf, deviceArray<T>(count));
  std::vector<T> h(count);
  for (size_t i = 0; i < count; ++i)
    h[i] = static_cast<T>(std::is_floating_point_v<T> ? valueOf(ck.rank, i)
                                                      : static_cast<double>(ck.rank * 1000 + i));
  DTC_RETURN_IF_ERROR(upload(buf.get(), h));
  CommRequest r = request(CommKind::kAllReduce, what, 0);
  r.dtype = dtype;
  r.op = op;
  r.inputs = {buf.get()};
  r.outputs = {buf.get()};
  r.bytes = {buf.bytes()};
  DTC_RETURN_IF_ERROR(runRequest(dc, ctx, std::move(r)));
  DTC_ASSIGN_OR_RETURN(std::vector<T> got, download(buf.get(), count));
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int q = 0; q < n; ++q)
      want += std::is_floating_point_v<T> ? valueOf(q, i) : static_cast<double>(q * 1000 + i);
    if (op == ReduceOp::kMean)
      want /= n;
    if (std::fabs(static_cast<double>(got[i]) - want) > 1e-6 * std::fabs(want)) {
      ck.expect(false, std::string(what) + " element " + std::to_string(i) + ": " +
                           std::to_string(static_cast<double>(got[i])) + ", want " +
                           std::to_string(want));
      return Status::ok();
    }
  }
  ck.pass(what);
  return Status::ok();
}

/// All-gather on group 1 (the world in reverse order): out of place, then in place.
Status checkAllGather(DeviceCommunicator &dc, CudaContext &ctx, Checker &ck,
                      const std::vector<int> &group) {
  const size_t b = 777, n = group.size();
  const int gr = static_cast<int>(std::find(group.begin(), group.end(), ck.rank) - group.begin());
  auto byteOf = [](int rank, size_t i) { return static_cast<uint8_t>((rank * 100 + i) % 251); };
  DTC_ASSIGN_OR_RETURN(auto in, deviceArray<uint8_t>(b));
  DTC_ASSIGN_OR_RETURN(auto out, deviceArray<uint8_t>(b * n));
  std::vector<uint8_t> h(b);
  for (size_t i = 0; i < b; ++i)
    h[i] = byteOf(ck.rank, i);
  for (int inPlace = 0; inPlace < 2; ++inPlace) {
    DTC_RETURN_IF_ERROR(upload(out.get(), std::vector<uint8_t>(b * n, 0)));
    uint8_t *src = inPlace ? out.get() + static_cast<size_t>(gr) * b : in.get();
    DTC_RETURN_IF_ERROR(upload(src, h));
    CommRequest r = request(CommKind::kAllGather, "gather", 1);
    r.dtype = ir::DType::kBool; // moved as bytes
    r.inputs = {src};
    r.outputs = {out.get()};
    r.bytes = {b};
    DTC_RETURN_IF_ERROR(runRequest(dc, ctx, std::move(r)));
    DTC_ASSIGN_OR_RETURN(std::vector<uint8_t> got, download(out.get(), b * n));
    for (size_t k = 0; k < n; ++k)
      for (size_t i = 0; i < b; ++i)
        if (got[k * b + i] != byteOf(group[k], i)) {
          ck.expect(false, std::string("all-gather ") + (inPlace ? "in place" : "out of place") +
                               ": block " + std::to_string(k) + " byte " + std::to_string(i));
          return Status::ok();
        }
  }
  ck.pass("all-gather of 777 bytes on a group in reverse rank order, out of place and in place");
  return Status::ok();
}

/// Reduce-scatter (sum) on the world: rank r receives block r of the sum.
Status checkReduceScatter(DeviceCommunicator &dc, CudaContext &ctx, Checker &ck, int n) {
  const size_t count = 513;
  DTC_ASSIGN_OR_RETURN(auto in, deviceArray<float>(count * static_cast<size_t>(n)));
  DTC_ASSIGN_OR_RETURN(auto out, deviceArray<float>(count));
  std::vector<float> h(in.n);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = static_cast<float>(valueOf(ck.rank, i));
  DTC_RETURN_IF_ERROR(upload(in.get(), h));
  CommRequest r = request(CommKind::kReduceScatter, "scatter", 0);
  r.inputs = {in.get()};
  r.outputs = {out.get()};
  r.bytes = {out.bytes()};
  DTC_RETURN_IF_ERROR(runRequest(dc, ctx, std::move(r)));
  DTC_ASSIGN_OR_RETURN(std::vector<float> got, download(out.get(), count));
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int q = 0; q < n; ++q)
      want += valueOf(q, static_cast<size_t>(ck.rank) * count + i);
    if (got[i] != static_cast<float>(want)) {
      ck.expect(false, "reduce-scatter element " + std::to_string(i) + ": " +
                           std::to_string(got[i]) + ", want " + std::to_string(want));
      return Status::ok();
    }
  }
  ck.pass("reduce-scatter (sum) of 513 f32 per rank");
  return Status::ok();
}

/// Broadcast from world rank 1 on the world (out of place on the root), then from world rank 0
/// on group 1 (in place: no input).
Status checkBroadcast(DeviceCommunicator &dc, CudaContext &ctx, Checker &ck) {
  const size_t b = 4097;
  auto byteOf = [](int rank, size_t i) { return static_cast<uint8_t>((rank * 37 + i * 3) % 256); };
  DTC_ASSIGN_OR_RETURN(auto in, deviceArray<uint8_t>(b));
  DTC_ASSIGN_OR_RETURN(auto out, deviceArray<uint8_t>(b));
  std::vector<uint8_t> h(b);
  for (size_t i = 0; i < b; ++i)
    h[i] = byteOf(ck.rank, i);
  struct Case {
    int root, group;
    bool inPlace;
  };
  for (Case c : {Case{1, 0, false}, Case{0, 1, true}}) {
    DTC_RETURN_IF_ERROR(upload(in.get(), h));
    DTC_RETURN_IF_ERROR(upload(out.get(), std::vector<uint8_t>(b, 0xee)));
    if (c.inPlace)
      DTC_RETURN_IF_ERROR(upload(out.get(), h));
    CommRequest r = request(CommKind::kBroadcast, "parameters", c.group);
    r.peer = c.root;
    if (!c.inPlace)
      r.inputs = {in.get()};
    r.outputs = {out.get()};
    r.bytes = {b};
    DTC_RETURN_IF_ERROR(runRequest(dc, ctx, std::move(r)));
    DTC_ASSIGN_OR_RETURN(std::vector<uint8_t> got, download(out.get(), b));
    for (size_t i = 0; i < b; ++i)
      if (got[i] != byteOf(c.root, i)) {
        ck.expect(false,
                  "broadcast from rank " + std::to_string(c.root) + " byte " + std::to_string(i));
        return Status::ok();
      }
  }
  ck.pass("broadcast of 4097 bytes: out of place from rank 1, in place on group 1 from rank 0");
  return Status::ok();
}

/// Send/recv between world ranks 0 and 1 in a 1F1B pipeline's order (rank 0 the first stage,
/// rank 1 the last): rank 0 sends activations 0 and 1, then receives gradient 0; rank 1
/// receives activation 0, sends gradient 0, then receives activation 1; all submitted before
/// any wait. With messages beyond NCCL's buffers (8 MiB) a send blocks until its recv runs, so
/// this completes only with the two directions on separate communicators and streams. On the
/// world (rank 0 is group rank 0) and on group 1 (the world reversed: the directions swap).
Status checkSendRecv(DeviceCommunicator &dc, CudaContext &ctx, Checker &ck, int group) {
  if (ck.rank > 1)
    return Status::ok();
  const size_t b = (size_t{8} << 20) + 1;
  auto byteOf = [](int message, size_t i) {
    return static_cast<uint8_t>((message * 59 + i * 7) % 253);
  };
  // Messages: 0 = activation 0, 1 = activation 1 (rank 0 -> 1), 2 = gradient 0 (rank 1 -> 0).
  const int from[3] = {0, 0, 1};
  std::vector<DeviceArray<uint8_t>> bufs;
  for (int m = 0; m < 3; ++m) {
    DTC_ASSIGN_OR_RETURN(auto a, deviceArray<uint8_t>(b));
    std::vector<uint8_t> h(b, 0);
    if (from[m] == ck.rank)
      for (size_t i = 0; i < b; ++i)
        h[i] = byteOf(m, i);
    DTC_RETURN_IF_ERROR(upload(a.get(), h));
    bufs.push_back(std::move(a));
  }
  auto message = [&](int m) {
    const bool send = from[m] == ck.rank;
    CommRequest r = request(send ? CommKind::kSend : CommKind::kRecv,
                            m == 2 ? "gradient 0" : "activation", group);
    r.peer = 1 - ck.rank;
    r.tag = m;
    if (send)
      r.inputs = {bufs[static_cast<size_t>(m)].get()};
    else
      r.outputs = {bufs[static_cast<size_t>(m)].get()};
    r.bytes = {b};
    return r;
  };
  const int order[2][3] = {{0, 1, 2}, {0, 2, 1}};
  std::vector<uint64_t> handles;
  for (int m : order[ck.rank])
    handles.push_back(dc.submit(message(m)));
  for (uint64_t h : handles)
    DTC_RETURN_IF_ERROR(dc.wait(h));
  DTC_CUDA_RETURN_IF_ERROR(kWhere, cudaStreamSynchronize(ctx.stream()));
  DTC_RETURN_IF_ERROR(dc.poll());
  for (int m = 0; m < 3; ++m) {
    if (from[m] == ck.rank)
      continue;
    DTC_ASSIGN_OR_RETURN(std::vector<uint8_t> got, download(bufs[static_cast<size_t>(m)].get(), b));
    for (size_t i = 0; i < b; ++i)
      if (got[i] != byteOf(m, i)) {
        ck.expect(false, "group " + std::to_string(group) + ": message " + std::to_string(m) +
                             " byte " + std::to_string(i));
        return Status::ok();
      }
  }
  ck.pass(group == 0 ? "send/recv of 8 MiB in 1F1B order between ranks 0 and 1 (world)"
                     : "send/recv of 8 MiB in 1F1B order on a group in reverse rank order");
  return Status::ok();
}

/// A single-member group (2 = {0}), and requests that fail without any NCCL call.
Status checkErrors(DeviceCommunicator &dc, CudaContext &ctx, Checker &ck) {
  DTC_ASSIGN_OR_RETURN(auto buf, deviceArray<int32_t>(64));
  DTC_RETURN_IF_ERROR(upload(buf.get(), std::vector<int32_t>(64, 5)));
  CommRequest r = request(CommKind::kAllReduce, "solo", 2);
  r.dtype = ir::DType::kInt32;
  r.inputs = {buf.get()};
  r.outputs = {buf.get()};
  r.bytes = {buf.bytes()};
  if (ck.rank == 0) {
    DTC_RETURN_IF_ERROR(runRequest(dc, ctx, r));
    DTC_ASSIGN_OR_RETURN(std::vector<int32_t> got, download(buf.get(), 64));
    ck.expect(got[0] == 5 && got[63] == 5, "all-reduce on a single-member group");
  } else {
    Status s = dc.wait(dc.submit(r));
    ck.expect(s.message().find("rank " + std::to_string(ck.rank) +
                               ": all-reduce 'solo' on group 2: this rank is not a member of "
                               "group 2 {0}") != std::string::npos,
              "non-member error: " + s.message());
  }
  r.group = 0;
  r.op = ReduceOp::kMean;
  Status mean = dc.wait(dc.submit(r));
  ck.expect(mean.message().find("mean of i32 is not supported") != std::string::npos,
            "mean of i32: " + mean.message());
  Status unknown = dc.wait(12345678);
  ck.expect(unknown.message().find("unknown request handle") != std::string::npos,
            "unknown handle: " + unknown.message());
  DTC_RETURN_IF_ERROR(dc.poll()); // the communicator is still usable
  ck.pass("single-member group, request errors (non-member, mean of i32, unknown handle)");
  return Status::ok();
}

/// An NCCL communicator over the world made directly (no dtc code), for the raw column.
Expected<ncclComm_t> rawWorldComm(Communicator &host) {
  ncclUniqueId id{};
  if (host.rank() == 0) {
    ncclResult_t e = ncclGetUniqueId(&id);
    if (e != ncclSuccess)
      return Status::error(kWhere, std::string("ncclGetUniqueId: ") + ncclGetErrorString(e));
  }
  DTC_RETURN_IF_ERROR(host.broadcast(&id, sizeof id, 0, "raw NCCL unique id"));
  ncclComm_t comm = nullptr;
  ncclResult_t e = ncclCommInitRank(&comm, host.size(), id, host.rank());
  if (e != ncclSuccess)
    return Status::error(kWhere, std::string("ncclCommInitRank: ") + ncclGetErrorString(e));
  return comm;
}

/// Seconds per call of `once` (which enqueues on the compute stream), by CUDA events around
/// `iters` calls after 5 warm-up calls.
Expected<double> timeCalls(CudaContext &ctx, int iters, const std::function<Status()> &once) {
  for (int i = 0; i < 5; ++i)
    DTC_RETURN_IF_ERROR(once());
  DTC_CUDA_RETURN_IF_ERROR(kWhere, cudaStreamSynchronize(ctx.stream()));
  cudaEvent_t start = nullptr, stop = nullptr;
  DTC_CUDA_RETURN_IF_ERROR(kWhere, cudaEventCreate(&start));
  cudaError_t e = cudaEventCreate(&stop);
  Status s = e == cudaSuccess ? Status::ok() : ops::cuda::cudaStatus(e, kWhere, "cudaEventCreate");
  float ms = 0;
  if (s.isOk())
    s = ops::cuda::cudaStatus(cudaEventRecord(start, ctx.stream()), kWhere, "cudaEventRecord");
  for (int i = 0; i < iters && s.isOk(); ++i)
    s = once();
  if (s.isOk())
    s = ops::cuda::cudaStatus(cudaEventRecord(stop, ctx.stream()), kWhere, "cudaEventRecord");
  if (s.isOk())
    s = ops::cuda::cudaStatus(cudaEventSynchronize(stop), kWhere, "cudaEventSynchronize");
  if (s.isOk())
    s = ops::cuda::cudaStatus(cudaEventElapsedTime(&ms, start, stop), kWhere,
                              "cudaEventElapsedTime");
  cudaEventDestroy(start);
  if (stop)
    cudaEventDestroy(stop);
  if (!s.isOk())
    return s;
  return ms * 1e-3 / iters;
}

/// All-reduce (sum, f32, in place) from 4 KiB to 256 MiB, raw ncclAllReduce on the compute
/// stream against NcclCommunicator's submit + wait on the same bytes: time per call,
/// busbw = 2(n-1)/n x bytes / time (nccl-tests' formula) and the ratio raw time / dtc time.
Status bandwidthTable(Communicator &host, DeviceCommunicator &dc, CudaContext &ctx, Checker &ck,
                      int n) {
  const size_t maxBytes = size_t{256} << 20;
  DTC_ASSIGN_OR_RETURN(auto buf, deviceArray<float>(maxBytes / sizeof(float)));
  DTC_CUDA_RETURN_IF_ERROR(kWhere, cudaMemset(buf.get(), 0, maxBytes));
  DTC_CUDA_RETURN_IF_ERROR(kWhere, cudaDeviceSynchronize());
  DTC_ASSIGN_OR_RETURN(ncclComm_t raw, rawWorldComm(host));
  if (ck.rank == 0)
    std::printf("\nall-reduce (sum, f32, in place), %d ranks: raw ncclAllReduce vs dtc's "
                "NcclCommunicator\n%12s %6s %10s %10s %10s %10s %8s\n",
                n, "bytes", "iters", "raw us", "raw busbw", "dtc us", "dtc busbw", "raw/dtc");
  Status s;
  for (size_t bytes = 4096; bytes <= maxBytes && s.isOk(); bytes *= 4) {
    const int iters = bytes <= (size_t{1} << 20) ? 200 : bytes <= (size_t{16} << 20) ? 50 : 20;
    Expected<double> rawT = timeCalls(ctx, iters, [&]() -> Status {
      ncclResult_t e = ncclAllReduce(buf.get(), buf.get(), bytes / sizeof(float), ncclFloat32,
                                     ncclSum, raw, ctx.stream());
      return e == ncclSuccess
                 ? Status::ok()
                 : Status::error(kWhere, std::string("ncclAllReduce: ") + ncclGetErrorString(e));
    });
    CommRequest r = request(CommKind::kAllReduce, "bandwidth", 0);
    r.inputs = {buf.get()};
    r.outputs = {buf.get()};
    r.bytes = {bytes};
    s = rawT.status();
    if (!s.isOk())
      break;
    Expected<double> dtcT = timeCalls(ctx, iters, [&]() { return dc.wait(dc.submit(r)); });
    s = dtcT.status();
    if (!s.isOk())
      break;
    auto busbw = [&](double seconds) {
      return static_cast<double>(bytes) / seconds / 1e9 * 2.0 * (n - 1) / n;
    };
    if (ck.rank == 0)
      std::printf("%12zu %6d %10.1f %10.2f %10.1f %10.2f %8.2f\n", bytes, iters, *rawT * 1e6,
                  busbw(*rawT), *dtcT * 1e6, busbw(*dtcT), *rawT / *dtcT);
  }
  ncclCommDestroy(raw);
  DTC_RETURN_IF_ERROR(s);
  return dc.poll();
}

/// A second communicator with a 2 s timeout: every rank receives from a neighbour that never
/// sends, so poll() must report the timeout (naming the request) and break the communicator.
Status checkTimeout(Communicator &host, const std::vector<std::vector<int>> &groups,
                    CudaContext &ctx, Checker &ck, int n) {
  CommOptions opts;
  opts.timeoutSeconds = 2;
  DTC_ASSIGN_OR_RETURN(auto dc, createNcclCommunicator(host, groups, ctx, opts));
  DTC_ASSIGN_OR_RETURN(auto buf, deviceArray<uint8_t>(64));
  CommRequest r = request(CommKind::kRecv, "never sent", 0);
  r.peer = (ck.rank + 1) % n;
  r.outputs = {buf.get()};
  r.bytes = {64};
  DTC_RETURN_IF_ERROR(dc->wait(dc->submit(r)));
  Status s;
  auto begin = std::chrono::steady_clock::now();
  while (s.isOk() && std::chrono::steady_clock::now() - begin < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s = dc->poll();
  }
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ck.expect(s.message().find("recv 'never sent' on the world: did not complete within 2.0 s") !=
                std::string::npos,
            "timeout error: " + (s.isOk() ? std::string("none after 30 s") : s.message()));
  ck.expect(after < 10, "the timeout took " + std::to_string(after) + " s");
  Status later = dc->wait(dc->submit(r));
  ck.expect(!later.isOk() && later.message() == s.message(),
            "a broken communicator repeats its error: " + later.message());
  dc.reset(); // the communicators are aborted: destruction must not hang
  // The compute stream waited for the aborted recv: it must drain too (bounded: a stream that
  // never drains is this check's failure, not a hang).
  begin = std::chrono::steady_clock::now();
  cudaError_t q = cudaErrorNotReady;
  while ((q = cudaStreamQuery(ctx.stream())) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() - begin < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (q != cudaSuccess) {
    ck.expect(false, std::string("the compute stream did not drain after the abort: ") +
                         cudaGetErrorString(q));
    return Status::error(kWhere, "the compute stream is stuck behind the aborted recv");
  }
  ck.pass("timeout: poll() names the request, aborts, and the communicator stays broken");
  return Status::ok();
}

int run() {
  int gpus = 0;
  cudaError_t e = cudaGetDeviceCount(&gpus);
  if (e != cudaSuccess)
    gpus = 0;
  const int world = launcherWorldSize();
  if (gpus < 2 || gpus < world) {
    if (launcherRank() == 0)
      std::printf("SKIP: dtc_nccl_check needs 2 GPUs, one per rank (found %d%s%s)\n", gpus,
                  e != cudaSuccess ? ": " : "", e != cudaSuccess ? cudaGetErrorString(e) : "");
    return 0;
  }
  if (world < 2) {
    std::fprintf(stderr, "error: %s: run it with 2 or more ranks: mpirun -n 2 dtc_nccl_check\n",
                 kWhere);
    return 2;
  }
  CommOptions hostOpts;
  auto host = Communicator::createMpi(hostOpts);
  if (!host) {
    std::fprintf(stderr, "error: %s\n", host.status().message().c_str());
    return 1;
  }
  Communicator &h = **host;
  const int rank = h.rank(), n = h.size();
  Checker ck;
  ck.rank = rank;
  std::vector<int> reversed;
  for (int q = n - 1; q >= 0; --q)
    reversed.push_back(q);
  const std::vector<std::vector<int>> groups = {reversed, {0}};
  Status s = h.createGroups(groups);
  Expected<std::unique_ptr<CudaContext>> ctx = Status::error(kWhere, "no context");
  if (s.isOk()) {
    ctx = CudaContext::create(rank % gpus);
    s = ctx.status();
  }
  if (s.isOk()) {
    CudaContext &c = **ctx;
    {
      auto dc = createNcclCommunicator(h, groups, c, hostOpts);
      s = dc.status();
      if (s.isOk()) {
        DeviceCommunicator &d = **dc;
        if (s.isOk())
          s = checkAllReduceOperands(d, c, ck, n);
        if (s.isOk())
          s = checkAllReduceType<float>(d, c, ck, n, ir::DType::kFloat32, ReduceOp::kMean,
                                        "all-reduce mean of 1001 f32");
        if (s.isOk())
          s = checkAllReduceType<double>(d, c, ck, n, ir::DType::kFloat64, ReduceOp::kMean,
                                         "all-reduce mean of 1001 f64");
        if (s.isOk())
          s = checkAllReduceType<int32_t>(d, c, ck, n, ir::DType::kInt32, ReduceOp::kSum,
                                          "all-reduce sum of 1001 i32");
        if (s.isOk())
          s = checkAllReduceType<int64_t>(d, c, ck, n, ir::DType::kInt64, ReduceOp::kSum,
                                          "all-reduce sum of 1001 i64");
        if (s.isOk())
          s = checkAllGather(d, c, ck, reversed);
        if (s.isOk())
          s = checkReduceScatter(d, c, ck, n);
        if (s.isOk())
          s = checkBroadcast(d, c, ck);
        if (s.isOk())
          s = checkSendRecv(d, c, ck, 0);
        if (s.isOk())
          s = checkSendRecv(d, c, ck, 1);
        if (s.isOk())
          s = checkErrors(d, c, ck);
        if (s.isOk())
          s = bandwidthTable(h, d, c, ck, n);
      }
    }
    if (s.isOk())
      s = checkTimeout(h, groups, c, ck, n);
  }
  if (!s.isOk()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::fflush(stderr);
    h.abortJob(1);
  }
  int32_t failures = ck.failures;
  s = h.allReduce(&failures, 1, ir::DType::kInt32, ReduceOp::kSum, "nccl_check failures");
  if (!s.isOk()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    h.abortJob(1);
  }
  if (rank == 0)
    std::printf("%s: %s (%d failure(s) over %d ranks)\n", kWhere, failures ? "FAIL" : "PASS",
                failures, n);
  return failures ? 1 : 0;
}

} // namespace

int main() { return run(); }
