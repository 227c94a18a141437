// The communicator of a multi-rank job (DESIGN.md section 8): one per process, over Open MPI's
// world (later: NCCL on GPUs). Collectives run on a communication thread with non-blocking MPI
// so the executor keeps computing: the executor launches an all-reduce and waits for it only
// when it needs the result. A watchdog on that thread exchanges heartbeats with every peer, so a
// peer that dies or stops answering makes this rank fail within `timeoutSeconds`, naming it.
#pragma once

#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"
#include "ops/cpu/Collectives.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtc::rt {

class Tracer;

enum class ReduceOp {
  kSum,
  kMean, ///< the sum divided by the group size (data-parallel gradient averaging)
};

struct CommOptions {
  /// A collective that does not complete within this many seconds, or a peer whose heartbeat
  /// is older than this, is an error naming the lost rank(s) (dtc-run --timeout).
  double timeoutSeconds = 60;
  /// Records every collective as a trace event on the "comm" thread of this rank (may be null).
  Tracer *tracer = nullptr;
};

/// One asynchronous collective's buffers: the communication thread first copies each
/// `inputs[i]` (when it is not the same pointer) into `outputs[i]`, then reduces the outputs in
/// place. When the outputs lie back to back in memory (gaps below 64 bytes) they are reduced as
/// one span in one MPI call; otherwise packed into a staging buffer and unpacked.
struct AllReduceRequest {
  std::string name; ///< "bucket 0": messages and traces
  ir::DType dtype = ir::DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::vector<const void *> inputs;
  std::vector<void *> outputs;
  std::vector<size_t> bytes; ///< per operand
};

class Communicator : public ops::cpu::KernelCollectives {
public:
  /// Initializes MPI (thread support at least MPI_THREAD_SERIALIZED) for the world of this
  /// process and starts the communication thread. Errors: MPI could not start, thread support
  /// too low.
  static Expected<std::unique_ptr<Communicator>> createMpi(const CommOptions &opts);
  /// Stops the communication thread and finalizes MPI (after a barrier on success; after a
  /// failure no further MPI call is made and the process should exit through abortJob()).
  ~Communicator() override = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  int groupSize() const override { return size(); }

  /// All ranks compare `fingerprint` (the plan's, any length) and `planWorldSize` with rank 0's
  /// and with the job's size. Every rank gets the same verdict: an error on all of them when any
  /// differs, naming the differing rank(s) and `planPath` ("rank 1 runs a different plan ...").
  virtual Status checkSameJob(const std::string &fingerprint, int planWorldSize,
                              const std::string &planPath) = 0;

  /// Queues an all-reduce on the communication thread and returns at once; the buffers must not
  /// be touched (outputs) or overwritten (inputs) until wait() returns. Calls must be made in the
  /// same order on every rank. Returns a handle for wait().
  virtual uint64_t allReduceAsync(AllReduceRequest request) = 0;
  /// Blocks until the collective `handle` has completed. Errors: timeout or lost peer (naming
  /// the collective and the rank(s)), an MPI error. After an error the communicator is broken:
  /// every later call returns the same error.
  virtual Status wait(uint64_t handle) = 0;
  /// Waits for every queued collective.
  virtual Status waitAll() = 0;

  // Blocking collectives (queued behind the asynchronous ones, so ordering is kept).
  /// Element-wise sum over the ranks, in place (KernelCollectives; also metrics).
  Status allReduceSum(double *data, size_t count, const std::string &what) override = 0;
  virtual Status allReduce(void *data, size_t count, ir::DType dtype, ReduceOp op,
                           const std::string &what) = 0;
  /// Rank `root`'s `bytes` bytes at `data` replace every other rank's.
  virtual Status broadcast(void *data, size_t bytes, int root, const std::string &what) = 0;
  /// recv (size() * bytes) receives every rank's `bytes` bytes of `send`, in rank order.
  virtual Status allGather(const void *send, size_t bytes, void *recv, const std::string &what) = 0;
  /// Sums `count * size()` elements of `send` over the ranks; rank r receives elements
  /// [r * count, (r + 1) * count) of the sum in `recv`.
  virtual Status reduceScatter(const void *send, void *recv, size_t count, ir::DType dtype,
                               ReduceOp op, const std::string &what) = 0;
  virtual Status send(const void *data, size_t bytes, int peer, int tag, const std::string &what) = 0;
  virtual Status recv(void *data, size_t bytes, int peer, int tag, const std::string &what) = 0;
  virtual Status barrier(const std::string &what) = 0;

  /// After an error on one rank: ends every process of the job (MPI_Abort) with `exitCode`.
  [[noreturn]] virtual void abortJob(int exitCode) = 0;
};

/// True when this process was started by mpirun/srun as one rank of a job of several processes
/// (Open MPI's OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX environment), and that job's size; 1 when
/// not started by a launcher.
int launcherWorldSize();
/// This process's rank as the launcher says (OMPI_COMM_WORLD_RANK, PMI_RANK), 0 when none.
int launcherRank();

} // namespace dtc::rt
