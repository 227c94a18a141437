// The MPI communicator (Communicator.h): requests of every kind are queued by submit() and run
// with MPI's non-blocking calls (MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block,
// MPI_Ibcast, MPI_Isend, MPI_Irecv), many in flight at once. A thread waiting in wait() drives
// MPI itself; otherwise a communication thread does, with heartbeats to every peer so that a
// lost or stopped peer is named within the timeout. One engine lock serializes every MPI call.
#include "runtime/comm/Communicator.h"

#include "runtime/Trace.h"
#include "runtime/comm/MpiReduce.h"

#include <mpi.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace dtc::rt {

const char *commKindName(CommKind kind) {
  switch (kind) {
  case CommKind::kAllReduce:
    return "all-reduce";
  case CommKind::kAllGather:
    return "all-gather";
  case CommKind::kReduceScatter:
    return "reduce-scatter";
  case CommKind::kBroadcast:
    return "broadcast";
  case CommKind::kSend:
    return "send";
  case CommKind::kRecv:
    return "recv";
  }
  return "request";
}

namespace {
/// Bytes per element of the dtypes the reductions take (1 for others: the request then fails
/// naming the dtype).
size_t elementBytes(ir::DType t) {
  switch (t) {
  case ir::DType::kFloat64:
  case ir::DType::kInt64:
    return 8;
  case ir::DType::kFloat32:
  case ir::DType::kInt32:
    return 4;
  case ir::DType::kFloat16:
  case ir::DType::kBFloat16:
    return 2;
  default:
    return 1;
  }
}
} // namespace

// --- Communicator's convenience forms: one request each --------------------------------------

uint64_t Communicator::allReduceAsync(AllReduceRequest request) {
  CommRequest r;
  r.kind = CommKind::kAllReduce;
  r.name = std::move(request.name);
  r.dtype = request.dtype;
  r.op = request.op;
  r.inputs = std::move(request.inputs);
  r.outputs = std::move(request.outputs);
  r.bytes = std::move(request.bytes);
  return submit(std::move(r));
}

Status Communicator::allReduceSum(double *data, size_t count, const std::string &what) {
  return allReduce(data, count, ir::DType::kFloat64, ReduceOp::kSum, what);
}

Status Communicator::allReduce(void *data, size_t count, ir::DType dtype, ReduceOp op,
                               const std::string &what) {
  CommRequest r;
  r.kind = CommKind::kAllReduce;
  r.name = what;
  r.dtype = dtype;
  r.op = op;
  r.inputs = {data};
  r.outputs = {data};
  r.bytes = {count * elementBytes(dtype)};
  return run(std::move(r));
}

Status Communicator::broadcast(void *data, size_t bytes, int root, const std::string &what) {
  CommRequest r;
  r.kind = CommKind::kBroadcast;
  r.name = what;
  r.peer = root;
  r.inputs = {data};
  r.outputs = {data};
  r.bytes = {bytes};
  return run(std::move(r));
}

Status Communicator::allGather(const void *send, size_t bytes, void *recv,
                               const std::string &what) {
  CommRequest r;
  r.kind = CommKind::kAllGather;
  r.name = what;
  r.inputs = {send};
  r.outputs = {recv};
  r.bytes = {bytes};
  return run(std::move(r));
}

Status Communicator::reduceScatter(const void *send, void *recv, size_t count, ir::DType dtype,
                                   ReduceOp op, const std::string &what) {
  CommRequest r;
  r.kind = CommKind::kReduceScatter;
  r.name = what;
  r.dtype = dtype;
  r.op = op;
  r.inputs = {send};
  r.outputs = {recv};
  r.bytes = {count * elementBytes(dtype)};
  return run(std::move(r));
}

Status Communicator::send(const void *data, size_t bytes, int peer, int tag,
                          const std::string &what) {
  CommRequest r;
  r.kind = CommKind::kSend;
  r.name = what;
  r.peer = peer;
  r.tag = tag;
  r.inputs = {data};
  r.bytes = {bytes};
  return run(std::move(r));
}

Status Communicator::recv(void *data, size_t bytes, int peer, int tag, const std::string &what) {
  CommRequest r;
  r.kind = CommKind::kRecv;
  r.name = what;
  r.peer = peer;
  r.tag = tag;
  r.outputs = {data};
  r.bytes = {bytes};
  return run(std::move(r));
}

namespace {

using Clock = std::chrono::steady_clock;
using mpi::divideBy;
using mpi::dtypeInfo;
using mpi::DTypeInfo;
using mpi::kMaxChunk;

double secondsSince(Clock::time_point t, Clock::time_point now) {
  return std::chrono::duration<double>(now - t).count();
}

/// "60 s", "2 s", "0.5 s": whole seconds from 10 s on, one decimal below.
std::string fmtSeconds(double s) {
  char buf[32];
  if (s >= 10 || s == static_cast<double>(static_cast<int64_t>(s)))
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  else
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string mpiErrorString(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS)
    return "error code " + std::to_string(code);
  return std::string(buf, static_cast<size_t>(len));
}

std::string listRanks(const std::vector<int> &ranks) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "}";
}

/// Polling while nobody waits (measured with tools/bench/allreduce_bench.cpp). A thread blocked
/// in wait() drives MPI itself, testing back to back as a blocking MPI call would (yielding the
/// core between tests when this host runs more ranks than it has cores), so a result is seen
/// at once. Meanwhile the communication thread stands aside. While nobody waits (the compute
/// thread computes) the communication thread tests back to back for `spinUs` (none when every
/// core runs a rank: the spin would take the core from a kernel), then sleeps between tests,
/// growing from `minSleepUs` to `maxSleepUs`. Overridable for experiments with
/// DTC_COMM_POLL="spinUs,minSleepUs,maxSleepUs".
struct PollScheme {
  int64_t spinUs = 50;
  int64_t minSleepUs = 5;
  int64_t maxSleepUs = 100;
};

PollScheme pollSchemeFromEnv() {
  PollScheme p;
  if (const char *e = std::getenv("DTC_COMM_POLL")) {
    long a = 0, b = 0, c = 0;
    if (std::sscanf(e, "%ld,%ld,%ld", &a, &b, &c) == 3 && a >= 0 && b >= 0 && c >= b) {
      p.spinUs = a;
      p.minSleepUs = b;
      p.maxSleepUs = c;
    }
  }
  return p;
}

constexpr double kHeartbeatInterval = 0.5; ///< seconds between heartbeats to each peer
constexpr double kDrainInterval = 0.05;    ///< seconds between heartbeat drains while polling
constexpr int kHeartbeatTag = 7;
constexpr int kMaxTag = 32767;

/// A communicator group: its world ranks in group-rank order, this rank's position and MPI
/// communicator (MPI_COMM_NULL when not a member).
struct Group {
  std::vector<int> ranks;
  int myRank = -1;
  MPI_Comm comm = MPI_COMM_NULL;
};

/// What a task does; the CommKinds plus the internal ones.
enum class Op {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
  kExclusive
};

/// One submitted request, from submit() to its completion. Set up by prepare() on the
/// submitting thread; started, tested and finished under the engine lock.
struct Task {
  Op op = Op::kAllReduce;
  const char *kind = "all-reduce"; ///< for messages and traces
  std::string name;
  int group = 0;
  std::shared_ptr<const Group> g;
  bool collective = true; ///< every member of the group takes part (heartbeat counts)
  int peer = -1;          ///< point-to-point: the other (world) rank; broadcast: the root
  int tag = 0;
  uint64_t bytes = 0; ///< traces
  CommRequest req;    ///< the buffers
  DTypeInfo info{1, MPI_BYTE, MPI_SUM, false, "bytes"};
  bool mean = false;

  // All-reduce: the outputs reduced as one span [base, base + span) (sendBase: the inputs laid
  // out alike, else in place after copying in), or packed in `staging`.
  struct Piece {
    std::byte *out;
    const std::byte *in;
    size_t bytes;
  };
  std::vector<Piece> pieces;
  bool contiguous = false;
  std::byte *base = nullptr;
  const std::byte *sendBase = nullptr;
  size_t span = 0;
  std::vector<std::byte> staging;

  // Send/recv: messages of at most kMaxChunk bytes. Recv: a message of another size (MPI
  // truncates a longer one and reports its size) is this recv's error.
  size_t chunks = 1;
  bool mismatch = false;
  size_t mismatchBytes = 0; ///< the size of the message that did not fit
  size_t mismatchChunk = 0;

  /// kExclusive (createGroups): runs alone once every earlier request has completed; `breaks`
  /// when its error breaks the communicator (a lost peer, an MPI error).
  std::function<Status(Task &)> exclusive;
  bool breaks = false;

  std::vector<MPI_Request> reqs;
  Clock::time_point began{};
  int64_t traceBegin = -1;             ///< -1: not started or no tracer
  std::atomic<int64_t> firstWaitNs{0}; ///< steady clock of the first wait() (send/recv timeout)
  std::atomic<bool> done{false};
  Status status;
};

/// Bytes of chunk `c` of a `total`-byte message cut into chunks of kMaxChunk bytes.
size_t chunkBytes(size_t total, size_t c) {
  return std::min(kMaxChunk, total - std::min(total, c * kMaxChunk));
}

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(const CommOptions &opts) : opts_(opts), poll_(pollSchemeFromEnv()) {}
  ~MpiCommunicator() override;

  /// Starts the thread and waits for MPI_Init_thread's outcome.
  Status start();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status createGroups(const std::vector<std::vector<int>> &groups) override;
  int sizeOf(int group) const override;
  int rankIn(int group) const override;
  Status checkSameJob(const std::string &fingerprint, int planWorldSize,
                      const std::string &planPath) override;
  uint64_t submit(CommRequest request) override;
  Status run(CommRequest request) override;
  Status wait(uint64_t handle) override;
  Status waitAll() override;
  Status barrier(const std::string &what) override;
  [[noreturn]] void abortJob(int exitCode) override;

private:
  std::string where() const { return "rank " + std::to_string(rank_); }
  Status taskError(const Task &t, const std::string &what) const {
    return Status::error(where() + ": " + t.kind + " '" + t.name + "'", what);
  }
  /// Validates `t.req` against the groups and sets the task up; errors name the request.
  Status prepare(Task &t);
  Status prepareAllReduce(Task &t);
  /// Queues a prepared task (or completes it at once with `invalid`) and returns its handle.
  uint64_t enqueue(std::shared_ptr<Task> t, const Status &invalid, bool wake);
  /// Waits for `t`, driving MPI on this thread.
  Status waitTask(Task &t);
  /// The first error: ok while the communicator works.
  Status failure() {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }

  // Under the engine lock (any thread).
  /// Starts queued tasks in submission order, tests the active ones, completes finished ones,
  /// and runs the heartbeat and watchdog when due. Returns true when something progressed.
  bool pollOnce();
  int startTask(Task &t);
  /// Tests the active tasks' requests; returns an MPI error code.
  int testActive(bool &progressed);
  Status finishTask(Task &t);
  void complete(const std::shared_ptr<Task> &t, Status s);
  /// Breaks the communicator: `s` for every queued and active task and every later call.
  void breakWith(const Status &s);
  /// Drives `reqs` to completion for task `t` alone (exclusive tasks, shutdown), with the
  /// watchdog.
  Status driveAlone(Task &t, std::vector<MPI_Request> &reqs);
  Status runCreateGroups(Task &t, const std::vector<std::vector<int>> &groups);
  /// Sends heartbeats when due and drains incoming ones.
  void heartbeat(Clock::time_point now, bool force);
  /// Watchdog verdict for the in-flight task `t` (ok while it may still complete).
  Status watchdog(const Task &t, Clock::time_point now);
  bool aborting() const { return aborting_.load(std::memory_order_relaxed); }

  // Communication thread.
  void threadMain(std::promise<Status> started);
  Status initMpi();
  void shutdownMpi();
  /// Parks the thread forever (abortJob owns MPI from now on).
  [[noreturn]] void park();

  CommOptions opts_;
  PollScheme poll_;
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;    ///< the world's collectives
  MPI_Comm p2pComm_ = MPI_COMM_NULL; ///< send/recv (tags of their own)
  MPI_Comm hbComm_ = MPI_COMM_NULL;  ///< heartbeats
  mpi::HalfOps halfOps_;

  std::thread thread_;
  /// Serializes every MPI call and owns the state below "Under the engine lock". Taken by the
  /// communication thread and by waiting threads; never while holding mu_.
  std::mutex engine_;
  std::mutex mu_;                  ///< queue_, pending_, failure_, groups_ (writes), stop_
  std::condition_variable workCv_; ///< wakes the communication thread
  std::deque<std::shared_ptr<Task>> queue_;
  std::unordered_map<uint64_t, std::shared_ptr<Task>> pending_;
  uint64_t nextHandle_ = 1;
  Status failure_; ///< the first error: the communicator is broken from then on
  std::atomic<bool> broken_{false};
  bool stop_ = false;
  std::atomic<bool> aborting_{false};
  bool parked_ = false;
  std::condition_variable parkedCv_;
  std::atomic<int> waiters_{0};  ///< threads blocked in wait()/waitAll()
  std::atomic<int> inFlight_{0}; ///< queued or started, not complete
  std::atomic<int> queued_{0};   ///< queue_ is not empty (lets pollOnce skip mu_)
  bool oversubscribed_ = false;  ///< more ranks on this host than cores
  /// At least one rank per core: every core runs a compute thread, so spinning while nobody
  /// waits would take a core from a kernel (measured: bucket launches of ~170 us on 2 ranks x 2
  /// cores); then the thread sleeps between tests from the start.
  bool everyCoreBusy_ = false;
  /// groups_[0] is the world; read by submit() under mu_, replaced by createGroups under both
  /// locks.
  std::vector<std::shared_ptr<const Group>> groups_;

  // Under the engine lock.
  std::deque<std::shared_ptr<Task>> toStart_; ///< taken from queue_, not started yet
  std::vector<std::shared_ptr<Task>> active_; ///< started, in submission order
  std::vector<MPI_Request> flat_;
  std::vector<std::pair<Task *, size_t>> owners_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  Task *failed_ = nullptr;        ///< testActive: the task whose request failed
  std::vector<uint64_t> entered_; ///< collectives started per group
  std::vector<Clock::time_point> lastSeen_;
  std::vector<std::vector<uint64_t>> peerEntered_; ///< per peer: its `entered_` as last heard
  std::vector<MPI_Request> hbSends_;
  std::vector<std::vector<uint64_t>> hbSendBufs_;
  std::vector<uint64_t> hbRecvBuf_;
  Clock::time_point lastSent_{};
  Clock::time_point lastDrain_{};
};

MpiCommunicator::~MpiCommunicator() {
  if (!thread_.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  workCv_.notify_all();
  thread_.join();
}

Status MpiCommunicator::start() {
  std::promise<Status> started;
  std::future<Status> f = started.get_future();
  thread_ = std::thread([this, p = std::move(started)]() mutable { threadMain(std::move(p)); });
  Status s = f.get();
  if (!s.isOk()) {
    thread_.join();
    return s;
  }
  return Status::ok();
}

/// Open MPI's libnbc picks a binomial tree (a reduce then a broadcast) for an in-place
/// MPI_Iallreduce, which takes 2-2.5x as long as the blocking MPI_Allreduce from 64 KiB on (2
/// ranks, measured); its ring matches it. Set before MPI_Init unless the user chose.
void tuneNonBlockingCollectives() {
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
}

Status MpiCommunicator::initMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return Status::error("MPI", "already initialized in this process (one communicator only)");
  tuneNonBlockingCollectives();
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS)
    return Status::error("MPI", "MPI_Init_thread failed: " + mpiErrorString(rc));
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return Status::error("MPI", "thread support level " + std::to_string(provided) +
                                    " is below MPI_THREAD_SERIALIZED");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm_)) != MPI_SUCCESS ||
      (rc = MPI_Comm_dup(MPI_COMM_WORLD, &p2pComm_)) != MPI_SUCCESS ||
      (rc = MPI_Comm_dup(MPI_COMM_WORLD, &hbComm_)) != MPI_SUCCESS)
    return Status::error(where(), "MPI_Comm_dup failed: " + mpiErrorString(rc));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(p2pComm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(hbComm_, MPI_ERRORS_RETURN);
  MPI_Op_create(&mpi::sumHalf, /*commute=*/1, &halfOps_.f16);
  MPI_Op_create(&mpi::sumBf16, /*commute=*/1, &halfOps_.bf16);
  MPI_Comm local;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) ==
      MPI_SUCCESS) {
    int localSize = 1;
    MPI_Comm_size(local, &localSize);
    MPI_Comm_free(&local);
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    oversubscribed_ = localSize > cores;
    everyCoreBusy_ = localSize >= cores;
  }
  auto world = std::make_shared<Group>();
  for (int r = 0; r < size_; ++r)
    world->ranks.push_back(r);
  world->myRank = rank_;
  world->comm = comm_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    groups_ = {world};
  }
  entered_.assign(1, 0);
  Clock::time_point now = Clock::now();
  lastSeen_.assign(static_cast<size_t>(size_), now);
  peerEntered_.assign(static_cast<size_t>(size_), {});
  hbSends_.assign(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  hbSendBufs_.assign(static_cast<size_t>(size_), {});
  lastDrain_ = now;
  return Status::ok();
}

void MpiCommunicator::threadMain(std::promise<Status> started) {
  // Precise short sleeps while polling (the default 50 us timer slack would dominate them).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  // A lower priority than the compute thread (10 nice levels below the process unless
  // DTC_COMM_NICE gives the increment): waking this thread on submit() must not take the core
  // from a thread that computes or drives MPI in wait() (measured: an all-reduce of 64 KiB to
  // 4 MiB submitted and waited for at once took 1.5-8x as long at the same priority on 2 ranks
  // x 2 cores). It mostly sleeps, and still gets its share for heartbeats and for progress
  // while nobody waits.
  const char *nice = std::getenv("DTC_COMM_NICE");
  const id_t tid = static_cast<id_t>(gettid());
  errno = 0;
  const int base = getpriority(PRIO_PROCESS, tid);
  if (errno == 0)
    setpriority(PRIO_PROCESS, tid, std::min(19, base + (nice ? std::atoi(nice) : 10)));
  Status init = initMpi();
  started.set_value(init);
  if (!init.isOk())
    return;
  {
    std::lock_guard<std::mutex> engine(engine_);
    heartbeat(Clock::now(), /*force=*/true);
  }
  int64_t sleepUs = poll_.minSleepUs;
  Clock::time_point busySince = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (aborting()) {
      lock.unlock();
      park();
    }
    if (!failure_.isOk()) {
      // Broken: no further MPI call; wait for the destructor or abortJob.
      workCv_.wait(lock, [&] { return stop_ || aborting(); });
      if (aborting())
        continue;
      return;
    }
    if (waiters_.load() > 0) {
      // A waiting thread drives MPI; stand aside until it leaves (it wakes this thread when
      // work remains).
      workCv_.wait_for(lock, std::chrono::duration<double>(kHeartbeatInterval),
                       [&] { return waiters_.load() == 0 || stop_ || aborting(); });
      sleepUs = poll_.minSleepUs;
      busySince = Clock::now();
      continue;
    }
    bool idle;
    {
      // active_ and toStart_ belong to the engine; a plain read of their emptiness under the
      // engine lock would invert the lock order, so take the engine after mu_ is released.
      idle = queue_.empty();
    }
    lock.unlock();
    bool progressed = false;
    bool nothingActive = false;
    {
      std::lock_guard<std::mutex> engine(engine_);
      if (!idle || !active_.empty() || !toStart_.empty())
        progressed = pollOnce();
      nothingActive = active_.empty() && toStart_.empty();
      if (nothingActive)
        heartbeat(Clock::now(), false);
    }
    lock.lock();
    if (nothingActive && queue_.empty()) {
      if (stop_)
        break;
      // Idle: sleep until work arrives, waking for the heartbeats.
      workCv_.wait_for(lock, std::chrono::duration<double>(kHeartbeatInterval),
                       [&] { return !queue_.empty() || stop_ || aborting() || !failure_.isOk(); });
      sleepUs = poll_.minSleepUs;
      busySince = Clock::now();
      continue;
    }
    if (progressed) {
      sleepUs = poll_.minSleepUs;
      continue;
    }
    // In flight and nobody waits: spin for a while (unless every core runs a rank), then sleep
    // between tests.
    const int64_t spinNs = everyCoreBusy_ ? 0 : poll_.spinUs * 1000;
    const Clock::time_point now = Clock::now();
    if (std::chrono::duration_cast<std::chrono::nanoseconds>(now - busySince).count() < spinNs)
      continue;
    lock.unlock();
    if (sleepUs > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    else
      std::this_thread::yield();
    sleepUs = std::min(poll_.maxSleepUs, std::max<int64_t>(1, sleepUs * 2));
    lock.lock();
  }
  lock.unlock();
  shutdownMpi();
}

void MpiCommunicator::park() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    parked_ = true;
  }
  parkedCv_.notify_all();
  while (true)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

// --- heartbeats and watchdog ------------------------------------------------------------------

void MpiCommunicator::heartbeat(Clock::time_point now, bool force) {
  if (size_ == 1)
    return;
  // A long gap without draining (no thread polled, or the process was stopped) says nothing
  // about the peers: give them the benefit of the doubt up to the last drain.
  if (secondsSince(lastDrain_, now) > 2 * kHeartbeatInterval)
    for (auto &t : lastSeen_)
      t = std::max(t, now - std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(kHeartbeatInterval)));
  lastDrain_ = now;
  if (force || secondsSince(lastSent_, now) >= kHeartbeatInterval) {
    lastSent_ = now;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_)
        continue;
      MPI_Request &req = hbSends_[static_cast<size_t>(p)];
      if (req != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (!flag)
          continue; // at most one outstanding heartbeat per peer (a stopped peer drains nothing)
      }
      // The collectives this rank has started, per group.
      std::vector<uint64_t> &hb = hbSendBufs_[static_cast<size_t>(p)];
      hb = entered_;
      MPI_Isend(hb.data(), static_cast<int>(hb.size()), MPI_UINT64_T, p, kHeartbeatTag, hbComm_,
                &req);
    }
  }
  for (int i = 0; i < 4 * size_ + 16; ++i) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kHeartbeatTag, hbComm_, &flag, &st) != MPI_SUCCESS || !flag)
      break;
    int count = 0;
    MPI_Get_count(&st, MPI_UINT64_T, &count);
    hbRecvBuf_.resize(static_cast<size_t>(std::max(count, 0)));
    if (MPI_Recv(hbRecvBuf_.data(), count, MPI_UINT64_T, st.MPI_SOURCE, kHeartbeatTag, hbComm_,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
      break;
    size_t p = static_cast<size_t>(st.MPI_SOURCE);
    peerEntered_[p] = hbRecvBuf_;
    lastSeen_[p] = now;
  }
}

Status MpiCommunicator::watchdog(const Task &t, Clock::time_point now) {
  const double timeout = opts_.timeoutSeconds;
  // Peers this task depends on.
  std::vector<int> peers;
  if (t.collective) {
    for (int p : t.g->ranks)
      if (p != rank_)
        peers.push_back(p);
  } else if (t.peer >= 0 && t.peer != rank_) {
    peers.push_back(t.peer);
  }
  std::string lost;
  for (int p : peers) {
    double silent = secondsSince(lastSeen_[static_cast<size_t>(p)], now);
    if (silent > timeout)
      lost += std::string(lost.empty() ? "" : "; ") + "no heartbeat from rank " +
              std::to_string(p) + " for " + fmtSeconds(silent) + " (lost or stopped)";
  }
  // Collectives count from their start; a send or recv from the first wait on it (a pipeline
  // posts its recvs long before the peer computes what they receive).
  double elapsed = 0;
  bool timed = true;
  if (t.collective) {
    elapsed = secondsSince(t.began, now);
  } else {
    const int64_t w = t.firstWaitNs.load(std::memory_order_relaxed);
    timed = w != 0;
    if (timed)
      elapsed = secondsSince(
          std::max(t.began, Clock::time_point(std::chrono::duration_cast<Clock::duration>(
                                std::chrono::nanoseconds(w)))),
          now);
  }
  if (!lost.empty())
    return taskError(t,
                     (timed && elapsed > timeout ? "did not complete within " + fmtSeconds(timeout)
                                                 : std::string("cannot complete")) +
                         ": " + lost);
  if (!timed || elapsed <= timeout)
    return Status::ok();
  std::string why;
  const size_t g = static_cast<size_t>(t.group);
  for (int p : peers) {
    size_t q = static_cast<size_t>(p);
    double silent = secondsSince(lastSeen_[q], now);
    uint64_t theirs = g < peerEntered_[q].size() ? peerEntered_[q][g] : 0;
    if (silent > 3 * kHeartbeatInterval) {
      why += std::string(why.empty() ? "" : "; ") + "no heartbeat from rank " + std::to_string(p) +
             " for " + fmtSeconds(silent) + " (lost or stopped)";
    } else if (t.collective && theirs < entered_[g]) {
      why += std::string(why.empty() ? "" : "; ") + "rank " + std::to_string(p) + " has entered " +
             std::to_string(theirs) + " collectives of group " + std::to_string(t.group) +
             ", this rank " + std::to_string(entered_[g]) +
             ": it has not reached this collective (stuck or slow)";
    }
  }
  if (why.empty())
    why = t.collective ? "every peer is alive and has reached it (slow network or a mismatched "
                         "collective: different plans?)"
                       : "rank " + std::to_string(t.peer) + " is alive but has not matched it";
  return taskError(t, "did not complete within " + fmtSeconds(timeout) + ": " + why);
}

// --- submitting ---------------------------------------------------------------------------------

Status MpiCommunicator::prepareAllReduce(Task &t) {
  CommRequest &r = t.req;
  if (r.outputs.size() != r.bytes.size() || r.inputs.size() != r.bytes.size())
    return taskError(t, "inputs (" + std::to_string(r.inputs.size()) + "), outputs (" +
                            std::to_string(r.outputs.size()) + ") and bytes (" +
                            std::to_string(r.bytes.size()) + ") differ in length");
  const size_t elem = t.info.size;
  uint64_t total = 0;
  for (size_t i = 0; i < r.bytes.size(); ++i) {
    if (r.bytes[i] % elem != 0)
      return taskError(t, "operand " + std::to_string(i) + " has " + std::to_string(r.bytes[i]) +
                              " bytes, not a multiple of " + std::to_string(elem) + " (" +
                              t.info.name + ")");
    if (r.bytes[i] == 0)
      continue;
    if (!r.outputs[i] || !r.inputs[i])
      return taskError(t, "operand " + std::to_string(i) + " has a null buffer");
    t.pieces.push_back({static_cast<std::byte *>(r.outputs[i]),
                        static_cast<const std::byte *>(r.inputs[i]), r.bytes[i]});
    total += r.bytes[i];
  }
  t.bytes = total;
  if (t.pieces.empty())
    return Status::ok();
  // One span when the outputs, sorted by address, are at most 63 bytes apart (alignment padding,
  // reduced too) with gaps of whole elements. The choice depends on the layout, so every rank
  // must pass the same relative layout (the executor's arena does: same plan, 64-byte aligned
  // base); the staging path packs in request order, which does not depend on addresses.
  std::vector<Task::Piece> sortedCopy;
  if (t.pieces.size() > 1) {
    sortedCopy = t.pieces;
    std::sort(sortedCopy.begin(), sortedCopy.end(),
              [](const Task::Piece &a, const Task::Piece &b) { return a.out < b.out; });
  }
  const std::vector<Task::Piece> &sorted = t.pieces.size() > 1 ? sortedCopy : t.pieces;
  bool contiguous = true;
  for (size_t i = 1; i < sorted.size(); ++i) {
    std::byte *end = sorted[i - 1].out + sorted[i - 1].bytes;
    if (sorted[i].out < end || sorted[i].out - end >= 64 ||
        static_cast<size_t>(sorted[i].out - end) % elem != 0)
      contiguous = false;
  }
  t.contiguous = contiguous;
  if (!contiguous)
    return Status::ok();
  t.base = sorted.front().out;
  t.span = static_cast<size_t>(sorted.back().out + sorted.back().bytes - t.base);
  // The inputs laid out as the outputs (each at the same offset, none in place, the two spans
  // apart): MPI reads them directly, no copy in.
  const std::byte *in0 = sorted.front().in;
  bool sameLayout = true;
  for (const Task::Piece &p : sorted)
    if (p.in == p.out || p.in - in0 != p.out - t.base)
      sameLayout = false;
  if (sameLayout && (in0 + t.span <= t.base || t.base + t.span <= in0))
    t.sendBase = in0;
  return Status::ok();
}

Status MpiCommunicator::prepare(Task &t) {
  CommRequest &r = t.req;
  t.name = r.name;
  t.group = r.group;
  t.kind = commKindName(r.kind);
  t.peer = r.peer;
  t.tag = r.tag;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.group >= 0 && static_cast<size_t>(r.group) < groups_.size())
      t.g = groups_[static_cast<size_t>(r.group)];
  }
  if (!t.g)
    return taskError(t, "unknown group " + std::to_string(r.group) +
                            " (0 is the world; createGroups makes 1..n)");
  const Group &g = *t.g;
  const int n = static_cast<int>(g.ranks.size());
  if (g.myRank < 0)
    return taskError(t, "this rank is not a member of group " + std::to_string(r.group) + " " +
                            listRanks(g.ranks));
  auto operands = [&](size_t nIn, size_t nOut) -> Status {
    if (r.inputs.size() != nIn || r.outputs.size() != nOut || r.bytes.size() != 1)
      return taskError(t, "takes " + std::to_string(nIn) + " input(s), " + std::to_string(nOut) +
                              " output(s) and 1 size; got " + std::to_string(r.inputs.size()) +
                              ", " + std::to_string(r.outputs.size()) + " and " +
                              std::to_string(r.bytes.size()));
    for (const void *p : r.inputs)
      if (!p && r.bytes[0] > 0)
        return taskError(t, "null input buffer");
    for (const void *p : r.outputs)
      if (!p && r.bytes[0] > 0)
        return taskError(t, "null output buffer");
    return Status::ok();
  };
  auto reductionType = [&]() -> Status {
    std::optional<DTypeInfo> info = dtypeInfo(r.dtype, halfOps_);
    if (!info)
      return taskError(t, "unsupported element type (ONNX type " +
                              std::to_string(static_cast<int>(r.dtype)) +
                              "): reductions take f32, f64, i32, i64, f16, bf16");
    if (r.op == ReduceOp::kMean && !info->floating)
      return taskError(t, std::string("mean of ") + info->name +
                              " is not supported (integer division): use sum");
    t.info = *info;
    t.mean = r.op == ReduceOp::kMean && n > 1;
    return Status::ok();
  };
  switch (r.kind) {
  case CommKind::kAllReduce:
    t.op = Op::kAllReduce;
    DTC_RETURN_IF_ERROR(reductionType());
    return prepareAllReduce(t);
  case CommKind::kAllGather:
    t.op = Op::kAllGather;
    DTC_RETURN_IF_ERROR(operands(1, 1));
    if (r.bytes[0] > static_cast<size_t>(INT_MAX))
      return taskError(t, std::to_string(r.bytes[0]) + " bytes per rank: at most 2 GiB");
    t.bytes = r.bytes[0] * static_cast<size_t>(n);
    return Status::ok();
  case CommKind::kReduceScatter:
    t.op = Op::kReduceScatter;
    DTC_RETURN_IF_ERROR(reductionType());
    DTC_RETURN_IF_ERROR(operands(1, 1));
    if (r.bytes[0] % t.info.size != 0)
      return taskError(t, std::to_string(r.bytes[0]) + " bytes per rank, not a multiple of " +
                              std::to_string(t.info.size) + " (" + t.info.name + ")");
    if (r.bytes[0] / t.info.size > static_cast<size_t>(INT_MAX))
      return taskError(t, std::to_string(r.bytes[0] / t.info.size) +
                              " elements per rank: at most 2^31 - 1");
    t.bytes = r.bytes[0] * static_cast<size_t>(n);
    return Status::ok();
  case CommKind::kBroadcast: {
    t.op = Op::kBroadcast;
    if (r.inputs.empty())
      r.inputs = {r.outputs.empty() ? nullptr : r.outputs[0]};
    DTC_RETURN_IF_ERROR(operands(1, 1));
    auto it = std::find(g.ranks.begin(), g.ranks.end(), r.peer);
    if (it == g.ranks.end())
      return taskError(t, "root rank " + std::to_string(r.peer) + " is not a member of group " +
                              std::to_string(r.group) + " " + listRanks(g.ranks));
    t.bytes = r.bytes[0];
    return Status::ok();
  }
  case CommKind::kSend:
  case CommKind::kRecv: {
    const bool isSend = r.kind == CommKind::kSend;
    t.op = isSend ? Op::kSend : Op::kRecv;
    t.collective = false;
    DTC_RETURN_IF_ERROR(isSend ? operands(1, 0) : operands(0, 1));
    if (r.peer < 0 || r.peer >= size_ || r.peer == rank_)
      return taskError(t, "peer rank " + std::to_string(r.peer) +
                              " is not another rank of the job (size " + std::to_string(size_) +
                              ")");
    if (std::find(g.ranks.begin(), g.ranks.end(), r.peer) == g.ranks.end())
      return taskError(t, "peer rank " + std::to_string(r.peer) + " is not a member of group " +
                              std::to_string(r.group) + " " + listRanks(g.ranks));
    if (r.tag < 0 || r.tag > kMaxTag)
      return taskError(t, "tag " + std::to_string(r.tag) + " is outside [0, 32767]");
    t.bytes = r.bytes[0];
    t.chunks = std::max<size_t>(1, (r.bytes[0] + kMaxChunk - 1) / kMaxChunk);
    return Status::ok();
  }
  }
  return taskError(t, "unknown request kind");
}

uint64_t MpiCommunicator::enqueue(std::shared_ptr<Task> t, const Status &invalid, bool wake) {
  uint64_t h;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h = nextHandle_++;
    if (!invalid.isOk()) {
      // A malformed request is refused on every rank alike (same plan): the communicator stays
      // usable.
      t->status = invalid;
      t->done.store(true);
    } else if (!failure_.isOk()) {
      t->status = failure_;
      t->done.store(true);
    } else {
      queue_.push_back(t);
      queued_.fetch_add(1, std::memory_order_release);
      inFlight_.fetch_add(1);
      queued = true;
    }
    pending_[h] = std::move(t);
  }
  // Notified after unlocking: the woken communication thread must not block on the mutex the
  // caller (the compute thread, launching a bucket) still holds.
  if (queued && wake)
    workCv_.notify_one();
  return h;
}

uint64_t MpiCommunicator::submit(CommRequest request) {
  auto t = std::make_shared<Task>();
  t->req = std::move(request);
  Status s = prepare(*t);
  return enqueue(std::move(t), s, /*wake=*/true);
}

Status MpiCommunicator::run(CommRequest request) {
  // This thread waits at once and drives MPI itself: no need to wake the communication thread.
  auto t = std::make_shared<Task>();
  t->req = std::move(request);
  Status s = prepare(*t);
  return wait(enqueue(std::move(t), s, /*wake=*/false));
}

Status MpiCommunicator::barrier(const std::string &what) {
  auto t = std::make_shared<Task>();
  t->op = Op::kBarrier;
  t->kind = "barrier";
  t->name = what;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t->g = groups_.front();
  }
  return wait(enqueue(std::move(t), Status::ok(), /*wake=*/false));
}

// --- waiting ------------------------------------------------------------------------------------

Status MpiCommunicator::waitTask(Task &t) {
  if (!t.done.load(std::memory_order_acquire)) {
    int64_t zero = 0;
    t.firstWaitNs.compare_exchange_strong(
        zero, std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
                  .count());
    waiters_.fetch_add(1);
    // Drive MPI on this thread: the communication thread stands aside while a thread waits.
    while (!t.done.load(std::memory_order_acquire)) {
      if (aborting()) {
        waiters_.fetch_sub(1);
        return taskError(t, "aborted");
      }
      if (engine_.try_lock()) {
        pollOnce();
        engine_.unlock();
      }
      if (oversubscribed_)
        std::this_thread::yield();
    }
    if (waiters_.fetch_sub(1) == 1 && inFlight_.load() > 0) {
      // Hand the requests still in flight back to the communication thread.
      { std::lock_guard<std::mutex> lock(mu_); }
      workCv_.notify_one();
    }
  }
  return t.status;
}

Status MpiCommunicator::wait(uint64_t handle) {
  std::shared_ptr<Task> t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(handle);
    if (it == pending_.end()) {
      if (handle == 0 || handle >= nextHandle_)
        return Status::error(where(), "wait on unknown handle " + std::to_string(handle));
      return failure_; // completed and collected by waitAll
    }
    t = it->second;
  }
  Status s = waitTask(*t);
  std::lock_guard<std::mutex> lock(mu_);
  pending_.erase(handle);
  return s;
}

Status MpiCommunicator::waitAll() {
  std::vector<std::shared_ptr<Task>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<uint64_t, std::shared_ptr<Task>>> byHandle(pending_.begin(),
                                                                     pending_.end());
    std::sort(byHandle.begin(), byHandle.end(),
              [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &[h, t] : byHandle)
      tasks.push_back(t);
    pending_.clear();
  }
  Status first;
  for (const std::shared_ptr<Task> &task : tasks) {
    Status s = waitTask(*task);
    if (first.isOk() && !s.isOk())
      first = s;
  }
  return first.isOk() ? failure() : first;
}

// --- the engine -----------------------------------------------------------------------------

void MpiCommunicator::complete(const std::shared_ptr<Task> &t, Status s) {
  if (opts_.tracer && t->traceBegin >= 0) {
    Tracer::Event e;
    e.name = t->name;
    e.category = t->kind;
    e.thread = Tracer::kComm;
    e.beginUs = t->traceBegin;
    e.durationUs = opts_.tracer->nowUs() - t->traceBegin;
    e.bytes = t->bytes;
    opts_.tracer->record(std::move(e));
  }
  t->status = std::move(s);
  t->reqs.clear();
  inFlight_.fetch_sub(1);
  t->done.store(true, std::memory_order_release);
}

void MpiCommunicator::breakWith(const Status &s) {
  std::deque<std::shared_ptr<Task>> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.isOk())
      failure_ = s;
    queued.swap(queue_);
    queued_.store(0);
  }
  broken_.store(true);
  // Requests already started cannot be completed safely: they are abandoned (no further MPI
  // call; the process exits through abortJob).
  for (auto &t : active_)
    complete(t, s);
  for (auto &t : toStart_)
    complete(t, s);
  for (auto &t : queued)
    complete(t, s);
  active_.clear();
  toStart_.clear();
  workCv_.notify_all();
}

int MpiCommunicator::startTask(Task &t) {
  t.began = Clock::now();
  t.traceBegin = opts_.tracer ? opts_.tracer->nowUs() : -1;
  const Group &g = *t.g;
  const int n = static_cast<int>(g.ranks.size());
  if (t.collective)
    ++entered_[static_cast<size_t>(t.group)];
  CommRequest &r = t.req;
  switch (t.op) {
  case Op::kAllReduce: {
    const size_t elem = t.info.size;
    auto reduce = [&](const std::byte *in, std::byte *out, size_t bytes) {
      const size_t count = bytes / elem;
      for (size_t off = 0; off < count; off += kMaxChunk) {
        const int c = static_cast<int>(std::min(kMaxChunk, count - off));
        t.reqs.emplace_back();
        int rc = MPI_Iallreduce(in ? in + off * elem : MPI_IN_PLACE, out + off * elem, c,
                                t.info.mpi, t.info.sum, g.comm, &t.reqs.back());
        if (rc != MPI_SUCCESS)
          return rc;
      }
      return MPI_SUCCESS;
    };
    auto copyIn = [&] {
      for (const Task::Piece &p : t.pieces)
        if (p.in != p.out)
          std::memmove(p.out, p.in, p.bytes);
    };
    if (t.pieces.empty())
      return MPI_SUCCESS;
    if (t.contiguous) {
      if (n == 1 || !t.sendBase)
        copyIn();
      return n == 1 ? MPI_SUCCESS : reduce(t.sendBase, t.base, t.span);
    }
    if (n == 1) {
      copyIn();
      return MPI_SUCCESS;
    }
    t.staging.resize(t.bytes);
    size_t off = 0;
    for (const Task::Piece &p : t.pieces) {
      std::memcpy(t.staging.data() + off, p.in, p.bytes);
      off += p.bytes;
    }
    return reduce(nullptr, t.staging.data(), t.staging.size());
  }
  case Op::kAllGather: {
    const size_t b = r.bytes[0];
    std::byte *out = static_cast<std::byte *>(r.outputs[0]);
    const void *in = r.inputs[0];
    if (in == out + static_cast<size_t>(g.myRank) * b)
      in = MPI_IN_PLACE;
    if (n == 1) {
      if (in != MPI_IN_PLACE && b > 0)
        std::memmove(out, in, b);
      return MPI_SUCCESS;
    }
    t.reqs.emplace_back();
    return MPI_Iallgather(in, static_cast<int>(b), MPI_BYTE, out, static_cast<int>(b), MPI_BYTE,
                          g.comm, &t.reqs.back());
  }
  case Op::kReduceScatter: {
    const size_t count = r.bytes[0] / t.info.size;
    const void *in = r.inputs[0];
    void *out = r.outputs[0];
    if (n == 1) {
      if (in != out && r.bytes[0] > 0)
        std::memmove(out, in, r.bytes[0]);
      return MPI_SUCCESS;
    }
    t.reqs.emplace_back();
    // In place (inputs[0] == outputs[0]): MPI leaves this rank's block at the start.
    return MPI_Ireduce_scatter_block(in == out ? MPI_IN_PLACE : in, out, static_cast<int>(count),
                                     t.info.mpi, t.info.sum, g.comm, &t.reqs.back());
  }
  case Op::kBroadcast: {
    const size_t b = r.bytes[0];
    std::byte *data = static_cast<std::byte *>(r.outputs[0]);
    const int root =
        static_cast<int>(std::find(g.ranks.begin(), g.ranks.end(), t.peer) - g.ranks.begin());
    if (root == g.myRank && r.inputs[0] && r.inputs[0] != data && b > 0)
      std::memmove(data, r.inputs[0], b);
    if (n == 1)
      return MPI_SUCCESS;
    for (size_t off = 0; off < b; off += kMaxChunk) {
      t.reqs.emplace_back();
      int rc = MPI_Ibcast(data + off, static_cast<int>(std::min(kMaxChunk, b - off)), MPI_BYTE,
                          root, g.comm, &t.reqs.back());
      if (rc != MPI_SUCCESS)
        return rc;
    }
    return MPI_SUCCESS;
  }
  case Op::kSend: {
    // At least one message, so a zero-byte send still matches its recv.
    const std::byte *data = static_cast<const std::byte *>(r.inputs[0]);
    for (size_t c = 0; c < t.chunks; ++c) {
      t.reqs.emplace_back();
      int rc = MPI_Isend(data + c * kMaxChunk, static_cast<int>(chunkBytes(r.bytes[0], c)),
                         MPI_BYTE, t.peer, t.tag, p2pComm_, &t.reqs.back());
      if (rc != MPI_SUCCESS)
        return rc;
    }
    return MPI_SUCCESS;
  }
  case Op::kRecv: {
    // Posted at once: MPI matches recvs of one (peer, tag) in the order they were posted.
    std::byte *data = static_cast<std::byte *>(r.outputs[0]);
    for (size_t c = 0; c < t.chunks; ++c) {
      t.reqs.emplace_back();
      int rc = MPI_Irecv(data + c * kMaxChunk, static_cast<int>(chunkBytes(r.bytes[0], c)),
                         MPI_BYTE, t.peer, t.tag, p2pComm_, &t.reqs.back());
      if (rc != MPI_SUCCESS)
        return rc;
    }
    return MPI_SUCCESS;
  }
  case Op::kBarrier:
    t.reqs.emplace_back();
    return MPI_Ibarrier(g.comm, &t.reqs.back());
  case Op::kExclusive:
    break;
  }
  return MPI_SUCCESS;
}

int MpiCommunicator::testActive(bool &progressed) {
  flat_.clear();
  owners_.clear();
  for (const std::shared_ptr<Task> &t : active_)
    for (size_t i = 0; i < t->reqs.size(); ++i)
      if (t->reqs[i] != MPI_REQUEST_NULL) {
        flat_.push_back(t->reqs[i]);
        owners_.push_back({t.get(), i});
      }
  if (flat_.empty())
    return MPI_SUCCESS;
  indices_.resize(flat_.size());
  statuses_.resize(flat_.size());
  int outcount = 0;
  int rc = MPI_Testsome(static_cast<int>(flat_.size()), flat_.data(), &outcount, indices_.data(),
                        statuses_.data());
  if (outcount == MPI_UNDEFINED)
    outcount = 0;
  int failure = MPI_SUCCESS;
  for (int k = 0; k < outcount; ++k) {
    const size_t at = static_cast<size_t>(indices_[static_cast<size_t>(k)]);
    auto [task, i] = owners_[at];
    task->reqs[i] = MPI_REQUEST_NULL;
    progressed = true;
    const MPI_Status &st = statuses_[static_cast<size_t>(k)];
    const int err = rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : MPI_SUCCESS;
    if (task->op == Op::kRecv && (err == MPI_SUCCESS || err == MPI_ERR_TRUNCATE)) {
      // A message of another size: consumed (later ones still match), this recv fails.
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      if (!task->mismatch && (err == MPI_ERR_TRUNCATE ||
                              static_cast<size_t>(count) != chunkBytes(task->req.bytes[0], i))) {
        task->mismatch = true;
        task->mismatchBytes = static_cast<size_t>(count);
        task->mismatchChunk = i;
      }
    } else if (err != MPI_SUCCESS && failure == MPI_SUCCESS) {
      failure = err;
      failed_ = task;
    }
  }
  return rc == MPI_ERR_IN_STATUS ? failure : rc;
}

Status MpiCommunicator::finishTask(Task &t) {
  CommRequest &r = t.req;
  switch (t.op) {
  case Op::kAllReduce:
    if (t.pieces.empty() || t.g->ranks.size() == 1)
      return Status::ok(); // a mean over one rank is the value itself
    if (t.contiguous) {
      if (t.mean)
        divideBy(t.base, t.span / t.info.size, r.dtype, static_cast<int>(t.g->ranks.size()));
      return Status::ok();
    }
    if (t.mean)
      divideBy(t.staging.data(), t.staging.size() / t.info.size, r.dtype,
               static_cast<int>(t.g->ranks.size()));
    {
      size_t off = 0;
      for (const Task::Piece &p : t.pieces) {
        std::memcpy(p.out, t.staging.data() + off, p.bytes);
        off += p.bytes;
      }
    }
    t.staging = {};
    return Status::ok();
  case Op::kReduceScatter:
    if (t.mean)
      divideBy(r.outputs[0], r.bytes[0] / t.info.size, r.dtype,
               static_cast<int>(t.g->ranks.size()));
    return Status::ok();
  case Op::kRecv:
    if (t.mismatch) {
      const size_t sent = t.mismatchBytes + t.mismatchChunk * kMaxChunk;
      return taskError(t, "rank " + std::to_string(t.peer) + " sent " + std::to_string(sent) +
                              " bytes with tag " + std::to_string(t.tag) + ", this rank expects " +
                              std::to_string(r.bytes[0]) + " bytes");
    }
    return Status::ok();
  default:
    return Status::ok();
  }
}

bool MpiCommunicator::pollOnce() {
  if (broken_.load())
    return false;
  bool progressed = false;
  if (queued_.load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    while (!queue_.empty()) {
      toStart_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    queued_.store(0, std::memory_order_relaxed);
  }
  // Start in submission order (MPI matches collectives on a communicator in call order).
  while (!toStart_.empty()) {
    std::shared_ptr<Task> t = toStart_.front();
    if (t->op == Op::kExclusive) {
      if (!active_.empty())
        break; // after every earlier request, before every later one
      toStart_.pop_front();
      t->began = Clock::now();
      Status s = t->exclusive(*t);
      const bool breaks = t->breaks;
      complete(t, s);
      if (breaks) {
        breakWith(s);
        return true;
      }
      progressed = true;
      continue;
    }
    toStart_.pop_front();
    int rc = startTask(*t);
    if (rc != MPI_SUCCESS) {
      breakWith(taskError(*t, "MPI error: " + mpiErrorString(rc)));
      return true;
    }
    active_.push_back(std::move(t));
    progressed = true;
  }
  if (active_.empty())
    return progressed;

  int rc = testActive(progressed);
  if (rc != MPI_SUCCESS) {
    // Name the request whose MPI call failed (from its status), else the oldest.
    Task *failed = failed_ ? failed_ : active_.front().get();
    failed_ = nullptr;
    breakWith(taskError(*failed, "MPI error: " + mpiErrorString(rc)));
    return true;
  }
  // Complete the tasks whose requests are all done (recvs: once every chunk has matched).
  for (size_t i = 0; i < active_.size();) {
    Task &t = *active_[i];
    const bool allDone = std::all_of(t.reqs.begin(), t.reqs.end(),
                                     [](MPI_Request q) { return q == MPI_REQUEST_NULL; });
    if (!allDone) {
      ++i;
      continue;
    }
    std::shared_ptr<Task> done = std::move(active_[i]);
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    Status s = finishTask(t);
    complete(done, std::move(s));
    progressed = true;
  }
  // Heartbeats and the watchdog, every kDrainInterval.
  Clock::time_point now = Clock::now();
  if (secondsSince(lastDrain_, now) >= kDrainInterval) {
    heartbeat(now, false);
    for (const std::shared_ptr<Task> &t : active_) {
      Status s = watchdog(*t, now);
      if (!s.isOk()) {
        breakWith(s);
        return true;
      }
    }
  }
  return progressed;
}

Status MpiCommunicator::driveAlone(Task &t, std::vector<MPI_Request> &reqs) {
  t.began = Clock::now();
  while (true) {
    int flag = 0;
    int rc = MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      return taskError(t, "MPI error: " + mpiErrorString(rc));
    if (flag)
      return Status::ok();
    Clock::time_point now = Clock::now();
    if (secondsSince(lastDrain_, now) >= kDrainInterval) {
      if (aborting())
        return taskError(t, "aborted");
      heartbeat(now, false);
      DTC_RETURN_IF_ERROR(watchdog(t, now));
    }
    if (oversubscribed_)
      std::this_thread::yield();
  }
}

// --- groups ---------------------------------------------------------------------------------

int MpiCommunicator::sizeOf(int group) const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex &>(mu_));
  if (group < 0 || static_cast<size_t>(group) >= groups_.size())
    return 0;
  return static_cast<int>(groups_[static_cast<size_t>(group)]->ranks.size());
}

int MpiCommunicator::rankIn(int group) const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex &>(mu_));
  if (group < 0 || static_cast<size_t>(group) >= groups_.size())
    return -1;
  return groups_[static_cast<size_t>(group)]->myRank;
}

/// 62 bits of a hash of one group's rank list (FNV-1a over the ranks, then mixed), so that its
/// negation fits an int64 (the check all-reduces max(h) and max(-h)).
int64_t groupHash(const std::vector<int> &ranks) {
  uint64_t h = 1469598103934665603ULL ^ ranks.size();
  for (int r : ranks) {
    h ^= static_cast<uint32_t>(r);
    h *= 1099511628211ULL;
  }
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return static_cast<int64_t>(h >> 2);
}

Status MpiCommunicator::createGroups(const std::vector<std::vector<int>> &groups) {
  auto t = std::make_shared<Task>();
  t->op = Op::kExclusive;
  t->kind = "create groups";
  t->name = std::to_string(groups.size()) + " groups";
  {
    std::lock_guard<std::mutex> lock(mu_);
    t->g = groups_.front();
  }
  t->exclusive = [this, groups](Task &task) { return runCreateGroups(task, groups); };
  return wait(enqueue(std::move(t), Status::ok(), /*wake=*/false));
}

Status MpiCommunicator::runCreateGroups(Task &t, const std::vector<std::vector<int>> &groups) {
  // 1. This rank's verdict on its lists; every rank learns the worst (a flag and the count).
  std::string localError;
  for (size_t i = 0; i < groups.size() && localError.empty(); ++i) {
    const std::vector<int> &g = groups[i];
    const std::string name = "group " + std::to_string(i + 1) + " " + listRanks(g);
    if (g.empty())
      localError = name + " is empty";
    std::vector<bool> seen(static_cast<size_t>(size_), false);
    for (int r : g) {
      if (r < 0 || r >= size_) {
        localError = name + ": rank " + std::to_string(r) + " is outside the world (size " +
                     std::to_string(size_) + ")";
        break;
      }
      if (seen[static_cast<size_t>(r)]) {
        localError = name + " lists rank " + std::to_string(r) + " twice";
        break;
      }
      seen[static_cast<size_t>(r)] = true;
    }
  }
  const int64_t count = static_cast<int64_t>(groups.size());
  // max over the ranks of: (the highest rank with an invalid list) + 1, count, -count.
  int64_t head[3] = {localError.empty() ? 0 : rank_ + 1, count, -count};
  std::vector<MPI_Request> reqs(1);
  int rc = MPI_Iallreduce(MPI_IN_PLACE, head, 3, MPI_INT64_T, MPI_MAX, comm_, reqs.data());
  if (rc != MPI_SUCCESS) {
    t.breaks = true;
    return taskError(t, "MPI error: " + mpiErrorString(rc));
  }
  if (Status s = driveAlone(t, reqs); !s.isOk()) {
    t.breaks = true;
    return s;
  }
  if (!localError.empty())
    return taskError(t, localError);
  if (head[0] != 0)
    return taskError(t, "rank " + std::to_string(head[0] - 1) +
                            " has invalid group lists (the lists differ between ranks)");
  if (head[1] != -head[2])
    return taskError(t, "the ranks pass different numbers of groups (" + std::to_string(-head[2]) +
                            " to " + std::to_string(head[1]) + "; this rank " +
                            std::to_string(count) + ")");
  // 2. The same lists everywhere: max(h) == -max(-h) for every group's hash.
  std::vector<int64_t> hashes(2 * groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    hashes[i] = groupHash(groups[i]);
    hashes[groups.size() + i] = -hashes[i];
  }
  if (!hashes.empty()) {
    reqs.assign(1, MPI_REQUEST_NULL);
    rc = MPI_Iallreduce(MPI_IN_PLACE, hashes.data(), static_cast<int>(hashes.size()), MPI_INT64_T,
                        MPI_MAX, comm_, reqs.data());
    if (rc != MPI_SUCCESS) {
      t.breaks = true;
      return taskError(t, "MPI error: " + mpiErrorString(rc));
    }
    if (Status s = driveAlone(t, reqs); !s.isOk()) {
      t.breaks = true;
      return s;
    }
    for (size_t i = 0; i < groups.size(); ++i)
      if (hashes[i] != -hashes[groups.size() + i])
        return taskError(t, "group " + std::to_string(i + 1) +
                                " differs between ranks (this rank: " + listRanks(groups[i]) + ")");
  }
  // 3. Communicators: groups without a common rank share one MPI_Comm_split (a dp x pp mesh
  // needs two). MPI_Comm_split is blocking: the peers were all alive a moment ago (step 2).
  std::vector<std::shared_ptr<Group>> made;
  std::vector<int> layerOf(groups.size(), -1);
  std::vector<std::vector<bool>> used; // per layer: ranks taken
  for (size_t i = 0; i < groups.size(); ++i) {
    auto g = std::make_shared<Group>();
    g->ranks = groups[i];
    for (size_t k = 0; k < g->ranks.size(); ++k)
      if (g->ranks[k] == rank_)
        g->myRank = static_cast<int>(k);
    made.push_back(g);
    size_t layer = 0;
    for (; layer < used.size(); ++layer)
      if (std::none_of(groups[i].begin(), groups[i].end(),
                       [&](int r) { return used[layer][static_cast<size_t>(r)]; }))
        break;
    if (layer == used.size())
      used.emplace_back(static_cast<size_t>(size_), false);
    for (int r : groups[i])
      used[layer][static_cast<size_t>(r)] = true;
    layerOf[i] = static_cast<int>(layer);
  }
  for (size_t layer = 0; layer < used.size(); ++layer) {
    int color = MPI_UNDEFINED, key = 0;
    size_t mine = groups.size();
    for (size_t i = 0; i < groups.size(); ++i)
      if (layerOf[i] == static_cast<int>(layer) && made[i]->myRank >= 0) {
        color = static_cast<int>(i);
        key = made[i]->myRank;
        mine = i;
      }
    MPI_Comm c = MPI_COMM_NULL;
    rc = MPI_Comm_split(comm_, color, key, &c);
    if (rc != MPI_SUCCESS) {
      t.breaks = true;
      return taskError(t, "MPI_Comm_split failed: " + mpiErrorString(rc));
    }
    if (mine < groups.size()) {
      MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
      made[mine]->comm = c;
    }
  }
  // 4. Replace the old groups (every request on them has completed: this task runs alone).
  std::vector<std::shared_ptr<const Group>> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old.assign(groups_.begin() + 1, groups_.end());
    groups_.resize(1);
    for (auto &g : made)
      groups_.push_back(g);
  }
  for (auto &g : old)
    if (g->comm != MPI_COMM_NULL) {
      MPI_Comm c = g->comm;
      MPI_Comm_free(&c);
    }
  entered_.resize(1);
  entered_.resize(groups.size() + 1, 0);
  return Status::ok();
}

void MpiCommunicator::shutdownMpi() {
  std::lock_guard<std::mutex> engine(engine_);
  // Barrier (with the watchdog, so a lost peer cannot hang the exit), then finalize.
  Task t;
  t.kind = "barrier";
  t.name = "shutdown";
  t.g = groups_.front();
  std::vector<MPI_Request> reqs(1);
  Status s = MPI_Ibarrier(comm_, reqs.data()) == MPI_SUCCESS ? driveAlone(t, reqs)
                                                             : taskError(t, "MPI_Ibarrier failed");
  if (!s.isOk()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = s;
    return; // no MPI_Finalize after a failure: it could hang
  }
  // Every rank has stopped submitting; complete the outstanding heartbeats and drain stragglers.
  for (int i = 0; i < 2000; ++i) {
    int flag = 0;
    MPI_Testall(static_cast<int>(hbSends_.size()), hbSends_.data(), &flag, MPI_STATUSES_IGNORE);
    if (flag)
      break;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  t.name = "shutdown (heartbeats)";
  reqs.assign(1, MPI_REQUEST_NULL);
  if (MPI_Ibarrier(hbComm_, reqs.data()) != MPI_SUCCESS || !driveAlone(t, reqs).isOk())
    return;
  while (true) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kHeartbeatTag, hbComm_, &flag, &st) != MPI_SUCCESS || !flag)
      break;
    int count = 0;
    MPI_Get_count(&st, MPI_UINT64_T, &count);
    hbRecvBuf_.resize(static_cast<size_t>(std::max(count, 0)));
    MPI_Recv(hbRecvBuf_.data(), count, MPI_UINT64_T, st.MPI_SOURCE, kHeartbeatTag, hbComm_,
             MPI_STATUS_IGNORE);
  }
  for (size_t i = 1; i < groups_.size(); ++i)
    if (groups_[i]->comm != MPI_COMM_NULL) {
      MPI_Comm c = groups_[i]->comm;
      MPI_Comm_free(&c);
    }
  MPI_Op_free(&halfOps_.f16);
  MPI_Op_free(&halfOps_.bf16);
  MPI_Comm_free(&hbComm_);
  MPI_Comm_free(&p2pComm_);
  MPI_Comm_free(&comm_);
  MPI_Finalize();
}

// --- checkSameJob ---------------------------------------------------------------------------

/// The fixed-size record every rank contributes: a 32-byte digest of the fingerprint (four
/// FNV-1a hashes with different seeds, plus the length), the sizes, and the plan path.
struct JobRecord {
  uint64_t digest[4];
  uint64_t fingerprintLength;
  int32_t planWorldSize;
  int32_t mpiSize;
  char path[192];
};

void digest(const std::string &s, uint64_t out[4]) {
  for (int k = 0; k < 4; ++k) {
    uint64_t h = 1469598103934665603ULL ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(k + 1));
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    h ^= h >> 29; // finalize (FNV's low bits mix poorly)
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    out[k] = h;
  }
}

std::string recordPath(const JobRecord &r) { return std::string(r.path, strnlen(r.path, 192)); }

Status MpiCommunicator::checkSameJob(const std::string &fingerprint, int planWorldSize,
                                     const std::string &planPath) {
  JobRecord mine;
  std::memset(&mine, 0, sizeof mine);
  digest(fingerprint, mine.digest);
  mine.fingerprintLength = fingerprint.size();
  mine.planWorldSize = planWorldSize;
  mine.mpiSize = size_;
  // Keep the tail of a long path (the file name matters most).
  std::string path = planPath.size() < sizeof mine.path
                         ? planPath
                         : "..." + planPath.substr(planPath.size() - (sizeof mine.path - 4));
  std::memcpy(mine.path, path.data(), path.size());
  std::vector<JobRecord> all(static_cast<size_t>(size_));
  DTC_RETURN_IF_ERROR(allGather(&mine, sizeof mine, all.data(), "check same job"));

  // Every rank evaluates the same table: the same verdict everywhere.
  const JobRecord &r0 = all[0];
  std::vector<std::string> problems;
  int differing = 0;
  for (size_t r = 1; r < all.size(); ++r) {
    const JobRecord &x = all[r];
    if (std::memcmp(x.digest, r0.digest, sizeof r0.digest) != 0 ||
        x.fingerprintLength != r0.fingerprintLength) {
      if (++differing <= 4)
        problems.push_back("rank " + std::to_string(r) + " runs plan " + recordPath(x) +
                           " whose fingerprint differs from rank 0's (" + recordPath(r0) + ")");
    }
  }
  if (differing > 4)
    problems.push_back("and " + std::to_string(differing - 4) + " more ranks");
  if (differing == 0 && r0.planWorldSize != r0.mpiSize)
    problems.push_back("the plan is for " + std::to_string(r0.planWorldSize) +
                       " ranks, the job has " + std::to_string(r0.mpiSize) +
                       " (mpirun -n / dtc-run --nproc must match --strategy dp=N)");
  if (problems.empty())
    return Status::ok();
  std::string msg;
  for (const std::string &p : problems)
    msg += (msg.empty() ? "" : "; ") + p;
  return Status::error(msg);
}

[[noreturn]] void MpiCommunicator::abortJob(int exitCode) {
  std::fflush(stdout);
  std::fflush(stderr);
  aborting_.store(true);
  {
    std::unique_lock<std::mutex> lock(mu_);
    workCv_.notify_all();
    // The communication thread parks at its next check (it stops calling MPI); a thread blocked
    // beyond that is not waited for.
    if (thread_.joinable())
      parkedCv_.wait_for(lock, std::chrono::seconds(1), [&] { return parked_ || stop_; });
  }
  // A waiting thread may be inside an MPI call: let it return first (it stops at its next test).
  for (int i = 0; i < 1000 && !engine_.try_lock(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  MPI_Abort(MPI_COMM_WORLD, exitCode);
  std::_Exit(exitCode); // MPI_Abort does not return; in case it does
}

} // namespace

Expected<std::unique_ptr<Communicator>> Communicator::createMpi(const CommOptions &opts) {
  if (!(opts.timeoutSeconds > 0))
    return Status::error("communicator",
                         "timeout must be positive, got " + std::to_string(opts.timeoutSeconds));
  auto c = std::make_unique<MpiCommunicator>(opts);
  DTC_RETURN_IF_ERROR(c->start());
  return std::unique_ptr<Communicator>(std::move(c));
}

} // namespace dtc::rt
