// The MPI communicator's internals (Communicator.h is the interface): the task a request
// becomes, the groups, the polling scheme and the MpiCommunicator class, whose definitions are
// split by concern: MpiCommunicator.cpp (start-up, the communication thread, heartbeats and the
// watchdog, shutdown), MpiRequests.cpp (submitting, waiting, the engine that starts and tests
// MPI's non-blocking calls) and MpiGroups.cpp (communicator groups, the same-job check).
// Included by those three files only.
#pragma once

#include "runtime/comm/Communicator.h"

#include "runtime/Trace.h"
#include "runtime/comm/MpiReduce.h"

#include <mpi-ext.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
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

namespace dtc::rt::mpi {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point t, Clock::time_point now) {
  return std::chrono::duration<double>(now - t).count();
}

/// "60 s", "2 s", "0.5 s": whole seconds from 10 s on, one decimal below.
inline std::string fmtSeconds(double s) {
  char buf[32];
  if (s >= 10 || s == static_cast<double>(static_cast<int64_t>(s)))
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  else
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

inline std::string mpiErrorString(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS)
    return "error code " + std::to_string(code);
  return std::string(buf, static_cast<size_t>(len));
}

inline std::string listRanks(const std::vector<int> &ranks) {
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

inline PollScheme pollSchemeFromEnv() {
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
  std::vector<Piece> sorted; ///< prepareAllReduce's scratch (kept with the pooled task)
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

  /// The persistent collective (MpiCommunicator::pcache_ slot) this task started, -1 if none.
  int pslot = -1;

  // A small collective of a power-of-two group run as point-to-point exchanges on
  // MpiCommunicator::xchComm_ (MpiCommunicator::exchangeEligible): one phase per partner
  // (all-reduce and all-gather: recursive doubling; reduce-scatter: recursive halving), each
  // message cut into eager-sized segments; the reduction of a phase's received bytes runs when
  // its messages are complete, then the next phase is posted.
  bool exchange = false;
  int phase = 0;  ///< the phase whose messages are in flight
  int phases = 0; ///< log2 of the group size
  int xtag = 0;   ///< the tag of this collective's messages (group and sequence number)
  /// All-reduce as a reduce-scatter by recursive halving then an all-gather by recursive
  /// doubling (Rabenseifner's; ExchangeScheme::halvingBytes): each rank sends and reduces half
  /// the bytes of recursive doubling on 2 ranks. Phases 0..m-1 reduce, m..2m-1 gather.
  bool halving = false;
  std::byte *work = nullptr; ///< all-reduce: the buffer reduced in place (base or staging)
  std::vector<std::byte> scratch; ///< received bytes (kept with the pooled task)

  uint64_t handle = 0;     ///< its handle (submit), 0 for internal tasks
  bool background = false; ///< counted in MpiCommunicator::inFlightBackground_
  std::vector<MPI_Request> reqs;
  Clock::time_point began{};
  int64_t traceBegin = -1;             ///< -1: not started or no tracer
  std::atomic<int64_t> firstWaitNs{0}; ///< steady clock of the first wait() (send/recv timeout)
  std::atomic<bool> done{false};
  Status status;

  /// Back to the state of a new task, keeping the capacity of its buffers (the pool).
  void reset();
};

/// What identifies a persistent collective (CommRequest::persistent): the MPI call's arguments.
struct PersistentKey {
  Op op = Op::kAllReduce;
  int group = 0;
  const void *in = nullptr; ///< MPI_IN_PLACE when in place
  void *out = nullptr;
  size_t count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op mop = MPI_OP_NULL;
  int root = 0;
  bool operator==(const PersistentKey &o) const {
    return op == o.op && group == o.group && in == o.in && out == o.out && count == o.count &&
           type == o.type && mop == o.mop && root == o.root;
  }
};

/// One initialized persistent collective; `busy` while a task has started it and not completed.
struct PersistentEntry {
  PersistentKey key;
  MPI_Request req = MPI_REQUEST_NULL;
  bool busy = false;
  uint64_t lastStart = 0; ///< MpiCommunicator::pstarts_ at its last start (LRU eviction)
};

/// Collectives of power-of-two groups run as point-to-point exchanges: all-reduces up to
/// `maxBytes` (the reduced buffer), all-gathers and reduce-scatters up to `gatherMaxBytes` (the
/// gathered or scattered total). Messages are cut into pieces of at most `segmentBytes` (a
/// multiple of 8; at most the shared-memory transport's eager limit, so that each piece is
/// copied once, without a rendezvous) unless they are above `wholeAbove` (all-reduce) or
/// `gatherWholeAbove` (all-gather, reduce-scatter): those go whole, as a rendezvous whose bytes
/// the kernel's cross-memory attach copies once. Open MPI's non-blocking collectives (libnbc)
/// take 1.5-3x as long as the blocking ones at small sizes (measured on 2 ranks: 4 KiB, 10 us
/// against 4 us); its reduce-scatter (blocking or not) reduces at the root and scatters, 3-6x
/// as long as the exchange by halving from 64 KiB to 16 MiB on 2 ranks; its all-gather of
/// 64 KiB took 3x the blocking MPI_Allgather (0.32 of its bandwidth; the exchange of whole
/// messages 0.9-0.93) and its persistent all-gather 0.5-0.8 from 256 KiB to 16 MiB. Overridable
/// with DTC_COMM_EXCHANGE="maxBytes,segmentBytes[,halvingBytes[,wholeAbove[,gatherMaxBytes[,
/// gatherWholeAbove]]]]" (maxBytes 0 without gatherMaxBytes: never).
struct ExchangeScheme {
  size_t maxBytes = kExchangeBytes;
  size_t segmentBytes = 4032;
  /// All-reduces from this size run as Task::halving. Above the exchange limit by default: on 2
  /// ranks x 2 cores recursive doubling of 64 KiB reached 1.1-1.2 of raw MPI, halving 0.75-0.9
  /// (and it disturbed the raw calls after it); DTC_COMM_EXCHANGE lowers it (the tests do).
  size_t halvingBytes = size_t{1} << 20;
  /// All-reduce messages above this many bytes go whole. None by default: an all-reduce of
  /// 64 KiB on 2 ranks x 2 cores reached 0.78-0.89 of raw MPI with whole messages, 0.82-0.84
  /// in pieces (medians of runs with the collectives in shuffled order).
  size_t wholeAbove = ~size_t{0};
  size_t gatherMaxBytes = kGatherExchangeBytes;
  /// All-gather and reduce-scatter messages above this many bytes go whole (all-gather of
  /// 64 KiB on 2 ranks x 2 cores: 0.90-0.93 of raw MPI whole, 0.31-0.34 in pieces).
  size_t gatherWholeAbove = size_t{16} << 10;
  /// Persistent all-reduces (CommRequest::persistent) below this many bytes run as
  /// non-persistent MPI_Iallreduce: on 2 ranks x 2 cores Open MPI's persistent all-reduce
  /// (MPIX_Allreduce_init) reached 0.88-0.92 of raw MPI_Allreduce at 4 MiB where MPI_Iallreduce
  /// reached 1.02-1.04, the same at 1, 16 and 25 MiB, and 1.6-1.8 where MPI_Iallreduce reached
  /// 1.0-1.1 at 32 and 64 MiB (medians of 5 runs, tools/bench/allreduce_runs.py). Overridable
  /// with DTC_COMM_PERSISTENT_MIN=bytes (alike on every rank: the choice is collective).
  size_t persistentAllReduceMinBytes = size_t{16} << 20;
};

inline ExchangeScheme exchangeSchemeFromEnv() {
  ExchangeScheme x;
  if (const char *e = std::getenv("DTC_COMM_EXCHANGE")) {
    unsigned long long a = 0, b = 0, c = 0, d = 0, f = 0, g = 0;
    const int got = std::sscanf(e, "%llu,%llu,%llu,%llu,%llu,%llu", &a, &b, &c, &d, &f, &g);
    if (got >= 2 && b >= 8) {
      x.maxBytes = static_cast<size_t>(a);
      x.segmentBytes = static_cast<size_t>(b) / 8 * 8;
      if (got >= 3)
        x.halvingBytes = static_cast<size_t>(c);
      if (got >= 4)
        x.wholeAbove = static_cast<size_t>(d);
      if (got >= 5)
        x.gatherMaxBytes = static_cast<size_t>(f);
      else if (x.maxBytes == 0)
        x.gatherMaxBytes = 0;
      if (got >= 6)
        x.gatherWholeAbove = static_cast<size_t>(g);
    }
  }
  if (const char *e = std::getenv("DTC_COMM_PERSISTENT_MIN")) {
    unsigned long long v = 0;
    if (std::sscanf(e, "%llu", &v) == 1)
      x.persistentAllReduceMinBytes = static_cast<size_t>(v);
  }
  return x;
}

/// Bytes of chunk `c` of a `total`-byte message cut into chunks of kMaxChunk bytes.
inline size_t chunkBytes(size_t total, size_t c) {
  return std::min(kMaxChunk, total - std::min(total, c * kMaxChunk));
}

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(const CommOptions &opts)
      : opts_(opts), poll_(pollSchemeFromEnv()), xch_(exchangeSchemeFromEnv()) {}
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
  CommStats stats() const override;
  Status barrier(const std::string &what) override;
  [[noreturn]] void abortJob(int exitCode) override;

private:
  std::string where() const { return "rank " + std::to_string(rank_); }
  Status taskError(const Task &t, const std::string &what) const {
    return Status::error(where() + ": " + t.kind + " '" + t.name + "'", what);
  }
  /// Validates `t.req` against the groups and sets the task up; errors name the request.
  Status prepare(Task &t);
  Status prepareKind(Task &t);
  Status prepareAllReduce(Task &t);
  /// Queues a prepared task (or completes it at once with `invalid`) and returns its handle.
  /// `startNow`: this thread starts it if the engine is free; `wake`: then wake the
  /// communication thread (background progress).
  uint64_t enqueue(std::shared_ptr<Task> t, const Status &invalid, bool wake, bool startNow);
  /// A task from the pool (reset), or a new one, with Task::g set to `group` (null when there is
  /// no such group), under one lock.
  std::shared_ptr<Task> newTask(int group);
  /// Gives a collected task back to the pool when nobody else holds it. Under mu_.
  void recycle(std::shared_ptr<Task> &t);
  /// pending_: the task of `handle` (null when none). Under mu_.
  std::shared_ptr<Task> *findPending(uint64_t handle);
  void addPending(std::shared_ptr<Task> t);
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
  /// Starts `t` (MPI's non-blocking call, or MPI_Start of its persistent collective); sets
  /// `held` instead when its persistent collective (or the cache slot it needs) is still busy
  /// with an earlier task: it is retried later, after that one completes.
  int startTask(Task &t, bool &held);
  /// The cache slot for `key`: its entry (`held` when busy), or on a miss (`miss`) a free or
  /// evicted slot set to `key` with a null request (-1 with `held` when the least recently
  /// started entry, to be evicted, is busy).
  int lookupPersistent(const PersistentKey &key, bool &held, bool &miss);
  /// Frees the cached persistent collectives of groups >= `fromGroup` (none may be busy).
  void dropPersistent(int fromGroup);
  /// Whether prepared task `t` runs as point-to-point exchanges (Task::exchange); the same
  /// verdict on every member (it depends on the kind, sizes and group only).
  bool exchangeEligible(const Task &t) const;
  /// Posts phase `t.phase` of an exchange (its segments to and from the partner).
  int postExchange(Task &t);
  /// Reduces what phase `t.phase` received and posts the next phase; `more` when it did.
  int advanceExchange(Task &t, bool &more);
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
  /// Exchanges (Task::exchange) of every group, addressed by world rank, tagged with
  /// Task::xtag; MPI_COMM_NULL when MPI's tag bound is too low for those tags.
  MPI_Comm xchComm_ = MPI_COMM_NULL;
  ExchangeScheme xch_;
  mpi::HalfOps halfOps_;

  std::thread thread_;
  /// Serializes every MPI call and owns the state below "Under the engine lock". Taken by the
  /// communication thread and by waiting threads; never while holding mu_.
  std::mutex engine_;
  std::mutex mu_;                  ///< queue_, pending_, failure_, groups_ (writes), stop_
  std::condition_variable workCv_; ///< wakes the communication thread
  std::deque<std::shared_ptr<Task>> queue_;
  /// Submitted and not yet collected by wait()/waitAll(), at handle % size (a power of two;
  /// grows when a slot is taken by an older handle): no allocation per request.
  std::vector<std::shared_ptr<Task>> pending_;
  size_t pendingCount_ = 0;
  std::vector<std::shared_ptr<Task>> pool_; ///< collected tasks for reuse
  uint64_t nextHandle_ = 1;
  Status failure_; ///< the first error: the communicator is broken from then on
  std::atomic<bool> broken_{false};
  bool stop_ = false;
  std::atomic<bool> aborting_{false};
  bool parked_ = false;
  std::condition_variable parkedCv_;
  std::atomic<int> waiters_{0};  ///< threads blocked in wait()/waitAll()
  std::atomic<int> inFlight_{0}; ///< queued or started, not complete
  /// In flight and at least kBackgroundBytes: the communication thread progresses them while
  /// nobody waits (smaller ones complete in wait()).
  std::atomic<int> inFlightBackground_{0};
  std::atomic<uint64_t> wakes_{0};
  std::atomic<uint64_t> threadCompletions_{0}; ///< CommStats::threadCompletions
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
  std::vector<PersistentEntry> pcache_; ///< at most kPersistentCacheSize
  uint64_t pstarts_ = 0;
  uint64_t polls_ = 0; ///< pollOnce calls that got as far as testing (clock reads: every 16th)
  std::atomic<uint64_t> phits_{0}, pmisses_{0}, pevictions_{0}, pcached_{0};
  Clock::time_point lastSent_{};
  Clock::time_point lastDrain_{};
};

} // namespace dtc::rt::mpi
