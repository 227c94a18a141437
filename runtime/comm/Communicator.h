// The communicator of a multi-rank job (DESIGN.md sections 6a, 8): one per process, over Open
// MPI's world and its groups (later: NCCL on GPUs). Every collective and send/recv is one
// asynchronous request (submit/wait) run with MPI's non-blocking calls, so the executor keeps
// computing. A heartbeat watchdog names a peer that dies or stops answering within the timeout.
#pragma once

#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"
#include "ops/cpu/Collectives.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace dtc::rt {

class Tracer;

enum class ReduceOp {
  kSum,
  kMean, ///< the sum divided by the group size (data-parallel gradient averaging)
  kMax,  ///< the element-wise maximum (f32, f64, i32, i64; not f16/bf16 on MPI)
};

struct CommOptions {
  /// A collective that does not complete within this many seconds, or a peer whose heartbeat
  /// is older than this, is an error naming the lost rank(s) (dtc-run --timeout).
  double timeoutSeconds = 60;
  /// Records every collective as a trace event on the "comm" thread of this rank (may be null).
  Tracer *tracer = nullptr;
  /// Tests: a request of this name fails to start as if its MPI call had failed (an MPI error:
  /// the communicator breaks, and that request and every other one in flight complete with it).
  std::string failStartOf;
};

/// The operands of a request (CommRequest's buffers and sizes): a list of trivially copyable
/// values kept in place up to kInline of them, on the heap beyond, so that a request of one to
/// four operands (every kind but a bucketed all-reduce) is built, moved and queued without a
/// memory allocation; a list that went to the heap keeps its capacity when cleared (the
/// communicator's pooled requests). Converts from std::vector and braced lists, and reads like
/// one (size, operator[], iteration).
template <class T> class OperandList {
  static_assert(std::is_trivially_copyable_v<T>, "operands are pointers and sizes");

public:
  static constexpr size_t kInline = 4;

  OperandList() = default;
  OperandList(std::initializer_list<T> values) { assign(values.begin(), values.size()); }
  OperandList(const std::vector<T> &values) { assign(values.data(), values.size()); }
  OperandList(const OperandList &o) { assign(o.data(), o.size()); }
  OperandList(OperandList &&o) noexcept { *this = std::move(o); }
  OperandList &operator=(const OperandList &o) {
    if (this != &o)
      assign(o.data(), o.size());
    return *this;
  }
  OperandList &operator=(OperandList &&o) noexcept {
    if (this == &o)
      return *this;
    if (o.onHeap_) {
      heap_.swap(o.heap_); // this list's heap capacity goes to `o`
      onHeap_ = true;
    } else {
      std::copy_n(o.inline_, o.size_, inline_);
      heap_.clear();
      onHeap_ = false;
    }
    size_ = o.size_;
    o.clear();
    return *this;
  }
  OperandList &operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.size());
    return *this;
  }
  OperandList &operator=(const std::vector<T> &values) {
    assign(values.data(), values.size());
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T *data() { return onHeap_ ? heap_.data() : inline_; }
  const T *data() const { return onHeap_ ? heap_.data() : inline_; }
  T *begin() { return data(); }
  T *end() { return data() + size_; }
  const T *begin() const { return data(); }
  const T *end() const { return data() + size_; }
  T &operator[](size_t i) { return data()[i]; }
  const T &operator[](size_t i) const { return data()[i]; }
  T &front() { return data()[0]; }
  T &back() { return data()[size_ - 1]; }
  const T &front() const { return data()[0]; }
  const T &back() const { return data()[size_ - 1]; }
  void push_back(T v) {
    if (!onHeap_ && size_ == kInline) {
      heap_.assign(inline_, inline_ + size_);
      onHeap_ = true;
    }
    if (onHeap_)
      heap_.push_back(v);
    else
      inline_[size_] = v;
    ++size_;
  }
  void clear() {
    size_ = 0;
    heap_.clear();
    onHeap_ = false;
  }
  /// Whether the values live on the heap (more than kInline of them; tests).
  bool onHeap() const { return onHeap_; }

private:
  void assign(const T *values, size_t n) {
    if (n <= kInline) {
      std::copy_n(values, n, inline_);
      heap_.clear();
      onHeap_ = false;
    } else {
      heap_.assign(values, values + n);
      onHeap_ = true;
    }
    size_ = n;
  }

  T inline_[kInline] = {};
  std::vector<T> heap_; ///< the values when onHeap_ (its capacity kept by clear())
  size_t size_ = 0;
  bool onHeap_ = false;
};

/// The kinds of asynchronous request (CommRequest::kind).
enum class CommKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kSend,
  kRecv,
};

/// "all-reduce", "all-gather", "reduce-scatter", "broadcast", "send", "recv".
const char *commKindName(CommKind kind);

/// One asynchronous communication request (Communicator::submit). Buffers are raw bytes of
/// `dtype` elements; `bytes[i]` is the size of operand i. Per kind:
/// - kAllReduce: outputs[i] = reduce(inputs[i]) over the group, element-wise (`op`). When
///   inputs[i] != outputs[i] the input is read, not written. Outputs that lie back to back in
///   memory (gaps below 64 bytes, whole elements; the gaps are reduced too) are reduced in one
///   call, others are packed into a staging buffer. Any number of operands, zero bytes allowed.
/// - kAllGather: inputs[0] holds b = bytes[0] bytes; outputs[0] (b * group size bytes) receives
///   every member's b bytes in group-rank order. inputs[0] may be outputs[0] + groupRank * b.
/// - kReduceScatter: inputs[0] holds b * group size bytes (group size blocks of b = bytes[0]
///   bytes); group rank r receives in outputs[0] (b bytes) block r of the reduction.
/// - kBroadcast: `peer` is the root, a world rank that is a member of the group; on the root
///   inputs[0] (when given and different) is first copied into outputs[0]; every member ends
///   with the root's bytes[0] bytes in outputs[0].
/// - kSend: inputs[0] (bytes[0] bytes) to world rank `peer` with `tag`.
/// - kRecv: outputs[0] (bytes[0] bytes) from world rank `peer` with `tag`; a message of another
///   size is an error naming both sizes (it is consumed; the communicator stays usable).
///   Sends and receives match by (peer, tag) in submission order, as MPI's non-overtaking rule
///   says; messages with different tags are never confused.
/// `group`: 0 is the world, 1..n the groups of createGroups(). This rank must be a member; for
/// kSend/kRecv `peer` must be a member too (point-to-point addresses world ranks in any group).
/// `dtype` matters for kAllReduce and kReduceScatter (f32, f64, i32, i64, and f16/bf16 through a
/// user-defined MPI operation summing in f32); `op` kMean is for floating types only, kMax for
/// all but f16/bf16.
/// Tags are in [0, 32767] (the least MPI_TAG_UB MPI guarantees).
struct CommRequest {
  CommKind kind = CommKind::kAllReduce;
  std::string name; ///< "bucket 0", "activations of stage 1": messages and traces
  int group = 0;
  ir::DType dtype = ir::DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int peer = -1; ///< broadcast root, send destination, recv source (world ranks)
  int tag = 0;   ///< send/recv
  OperandList<const void *> inputs;
  OperandList<void *> outputs;
  OperandList<size_t> bytes; ///< per operand (see the kinds above)
  /// Opt-in: the same request (kind, buffers, sizes, dtype, op, group, root) is submitted again
  /// and again (an executor's per-step collectives on its arena), so the communicator keeps it
  /// as an initialized MPI persistent collective (MPIX_*_init, then MPI_Start per submission)
  /// in a cache of at most kPersistentCacheSize entries per group, the group's least recently
  /// started evicted. Only all-reduce (outputs in one span, at least 16 MiB: below that Open
  /// MPI's persistent all-reduce was slower than MPI_Iallreduce; DTC_COMM_PERSISTENT_MIN),
  /// all-gather, reduce-scatter and broadcast of at most 1 GiB are kept, and not the small
  /// collectives that run as point-to-point exchanges (below); others run as without it.
  /// Initializing a persistent collective is collective: every member of the group must make the
  /// same hits and misses, so set it only where each member's buffers stay at fixed addresses for
  /// as long as it submits them (an arena that lives as long as the communicator, laid out alike on
  /// every member) and never for temporaries (the trainer's metrics). A request whose buffers
  /// changed is a miss and gets an entry of its own. Two submissions with the same key run one
  /// after the other.
  bool persistent = false;
};

/// All-reduces of at most this many bytes (the reduced buffer) on groups whose size is a power
/// of two run as point-to-point exchanges between the members (recursive doubling) instead of
/// MPI's non-blocking collectives, which are 1.5-3x slower there; every member must see the
/// same value (DTC_COMM_EXCHANGE overrides it for experiments: set it alike on every rank).
constexpr uint64_t kExchangeBytes = uint64_t{64} << 10;
/// All-gathers and reduce-scatters of at most this many bytes (the gathered or scattered total)
/// on groups whose size is a power of two run as exchanges too (recursive doubling; recursive
/// halving), at every size up to it: faster than Open MPI's collectives on 2 ranks from 4 KiB
/// to 16 MiB (runtime/comm/MpiCommunicator.h, ExchangeScheme).
constexpr uint64_t kGatherExchangeBytes = uint64_t{1} << 30;

/// Requests of at least this many bytes (CommRequest's total) wake the communication thread to
/// progress them in the background (Communicator::submit).
constexpr uint64_t kBackgroundBytes = uint64_t{1} << 20;

/// Persistent collectives the communicator keeps at most (CommRequest::persistent).
constexpr size_t kPersistentCacheSize = 64;

/// Counters of the communicator (tests, diagnostics).
struct CommStats {
  uint64_t persistentHits = 0;      ///< persistent requests started from the cache
  uint64_t persistentMisses = 0;    ///< persistent collectives initialized
  uint64_t persistentEvictions = 0; ///< cache entries freed to make room
  uint64_t persistentCached = 0;    ///< entries in the cache now
  uint64_t threadWakes = 0;         ///< submissions that woke the communication thread
  /// Requests the communication thread completed (progressed in the background: nobody was
  /// waiting for them when they completed).
  uint64_t threadCompletions = 0;
};

/// The all-reduce of a CommRequest (kind kAllReduce, world group); kept for the executor and
/// the trainer, which launch gradient buckets and metrics through allReduceAsync().
struct AllReduceRequest {
  std::string name; ///< "bucket 0": messages and traces
  ir::DType dtype = ir::DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  OperandList<const void *> inputs;
  OperandList<void *> outputs;
  OperandList<size_t> bytes; ///< per operand
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
  /// The world's size (KernelCollectives: synchronized BatchNorm reduces over the world).
  int groupSize() const override { return size(); }

  /// Creates communicator groups 1..groups.size() (in the order given; group 0 is the world).
  /// Each group lists world ranks; its order is the group-rank order (all-gather and
  /// reduce-scatter blocks). A rank may be in any number of groups (a dp x pp mesh: one dp and
  /// one pp group per rank). Collective over the world: every rank passes the same lists (a
  /// rank also lists groups it is not in). Replaces the groups of an earlier call; requests
  /// submitted before it complete first. Blocking. Errors (the same on every rank, groups left
  /// as before): an empty group, a rank out of range or listed twice in a group (naming the
  /// group), lists that differ between ranks (naming the first differing group), a lost peer.
  virtual Status createGroups(const std::vector<std::vector<int>> &groups) = 0;
  /// Number of ranks in `group` (0 for an unknown group id).
  virtual int sizeOf(int group) const = 0;
  /// This rank's position in `group` (its group rank), -1 when it is not a member or the group
  /// is unknown.
  virtual int rankIn(int group) const = 0;

  /// All ranks compare `fingerprint` (the plan's, any length) and `planWorldSize` with rank 0's
  /// and with the job's size. Every rank gets the same verdict: an error on all of them when any
  /// differs, naming the differing rank(s) and `planPath` ("rank 1 runs a different plan ...").
  virtual Status checkSameJob(const std::string &fingerprint, int planWorldSize,
                              const std::string &planPath) = 0;

  /// Queues `request` and returns at once with a handle for wait(). It is started on this
  /// thread when the engine is free (else by the thread that holds it); a request below
  /// kBackgroundBytes completes in the wait() on it (which drives MPI), a larger one also wakes
  /// the communication thread, which progresses it while this thread computes. The buffers must not
  /// be touched (outputs) or overwritten (inputs) until wait() returns. Many requests may be in
  /// flight; they are started in submission order, so collectives must be submitted in the
  /// same order on every member of their group (sends and receives in any order: they match by
  /// peer and tag). A malformed request (sizes, group, peer, tag, dtype)
  /// fails in wait() with a message naming it; the communicator stays usable.
  virtual uint64_t submit(CommRequest request) = 0;
  /// Blocks until request `handle` has completed; the waiting thread drives MPI meanwhile.
  /// Errors: the request's own error; a timeout or lost peer (naming the request and the
  /// rank(s)): a peer whose heartbeat is older than timeoutSeconds, a collective not complete
  /// within timeoutSeconds of its start, a send or recv not complete within timeoutSeconds of
  /// the first wait() on it; an MPI error. After a timeout, lost peer or MPI error the
  /// communicator is broken: every later call returns the same error.
  virtual Status wait(uint64_t handle) = 0;
  /// Waits for every request submitted and not yet waited for; the first error.
  virtual Status waitAll() = 0;
  /// The counters so far.
  virtual CommStats stats() const { return {}; }

  /// submit() and wait() in one, on this thread (which drives MPI meanwhile): the blocking form
  /// of any request, with wait()'s errors.
  virtual Status run(CommRequest request) { return wait(submit(std::move(request))); }

  /// submit() of an all-reduce over the world.
  uint64_t allReduceAsync(AllReduceRequest request);

  // Blocking forms (submit + wait, so ordering with the asynchronous requests is kept).
  /// Element-wise sum over the ranks, in place (KernelCollectives; also metrics).
  Status allReduceSum(double *data, size_t count, const std::string &what) override;
  /// `count` elements of `dtype` at `data` reduced over the world, in place.
  Status allReduce(void *data, size_t count, ir::DType dtype, ReduceOp op, const std::string &what);
  /// World rank `root`'s `bytes` bytes at `data` replace every other rank's.
  Status broadcast(void *data, size_t bytes, int root, const std::string &what);
  /// recv (size() * bytes) receives every rank's `bytes` bytes of `send`, in rank order.
  Status allGather(const void *send, size_t bytes, void *recv, const std::string &what);
  /// Reduces `count * size()` elements of `send` over the ranks; rank r receives elements
  /// [r * count, (r + 1) * count) of the reduction in `recv`.
  Status reduceScatter(const void *send, void *recv, size_t count, ir::DType dtype, ReduceOp op,
                       const std::string &what);
  Status send(const void *data, size_t bytes, int peer, int tag, const std::string &what);
  Status recv(void *data, size_t bytes, int peer, int tag, const std::string &what);
  /// Every rank of the world has reached it.
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
