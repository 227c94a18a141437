// The MPI communicator (Communicator.h): one communication thread per process owns MPI. It calls
// MPI_Init_thread, runs the queued collectives in FIFO order with non-blocking MPI polled with a
// short back-off sleep, exchanges heartbeats with every peer so that a lost or stopped peer is
// named within the timeout, and finalizes MPI. Callers only queue work and wait on it.
#include "runtime/comm/Communicator.h"

#include "runtime/Trace.h"
#include "runtime/comm/MpiReduce.h"

#include <mpi.h>
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
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
namespace {

using Clock = std::chrono::steady_clock;
using mpi::addInto;
using mpi::divideBy;
using mpi::dtypeInfo;
using mpi::DTypeInfo;
using mpi::kMaxChunk;
using mpi::RingState;

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


/// Polling of an in-flight collective (measured with tools/bench/allreduce_bench.cpp). While a
/// thread waits for a result (the compute thread is blocked, its core is free) the
/// communication thread tests back to back, as a blocking MPI call would (yielding the core
/// between tests when this host runs more ranks than it has cores). While nobody waits (the
/// compute thread computes) it tests back to back for `spinUs`, then sleeps between tests,
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

struct Heartbeat {
  uint64_t entered = 0;   ///< collectives this rank has started
  uint64_t completed = 0; ///< collectives this rank has completed
  int64_t timeUs = 0;     ///< sender's steady clock (informational)
};

/// One queued operation. `start` issues the non-blocking MPI calls (returning an MPI error code)
/// and `finish` runs after they complete (unpack, divide for a mean).
struct Task {
  std::string kind; ///< "all-reduce", "broadcast", ...
  std::string name;
  uint64_t bytes = 0;
  bool collective = true; ///< every rank takes part (counted in heartbeats)
  int peer = -1;          ///< point-to-point: the other rank
  std::function<int(std::vector<MPI_Request> &)> start;
  /// Multi-round algorithms: called when the current requests have completed; issues the next
  /// round's requests (none: the task is complete). Returns an MPI error code.
  std::function<int(std::vector<MPI_Request> &)> next;
  std::function<void()> finish;
  bool done = false;
  Status status;
};


class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(const CommOptions &opts) : opts_(opts), poll_(pollSchemeFromEnv()) {}
  ~MpiCommunicator() override;

  /// Starts the thread and waits for MPI_Init_thread's outcome.
  Status start();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status checkSameJob(const std::string &fingerprint, int planWorldSize,
                      const std::string &planPath) override;
  uint64_t allReduceAsync(AllReduceRequest request) override;
  Status wait(uint64_t handle) override;
  Status waitAll() override;
  Status allReduceSum(double *data, size_t count, const std::string &what) override {
    return allReduce(data, count, ir::DType::kFloat64, ReduceOp::kSum, what);
  }
  Status allReduce(void *data, size_t count, ir::DType dtype, ReduceOp op,
                   const std::string &what) override;
  Status broadcast(void *data, size_t bytes, int root, const std::string &what) override;
  Status allGather(const void *send, size_t bytes, void *recv, const std::string &what) override;
  Status reduceScatter(const void *send, void *recv, size_t count, ir::DType dtype, ReduceOp op,
                       const std::string &what) override;
  Status send(const void *data, size_t bytes, int peer, int tag, const std::string &what) override {
    // MPI_Isend reads the bytes only; one code path for both directions.
    return pointToPoint(true, const_cast<void *>(data), bytes, peer, tag, what);
  }
  Status recv(void *data, size_t bytes, int peer, int tag, const std::string &what) override {
    return pointToPoint(false, data, bytes, peer, tag, what);
  }
  Status barrier(const std::string &what) override;
  [[noreturn]] void abortJob(int exitCode) override;

private:
  std::string where() const { return "rank " + std::to_string(rank_); }
  Status taskError(const Task &t, const std::string &what) const {
    return Status::error(where() + ": " + t.kind + " '" + t.name + "'", what);
  }
  /// Queues `t` (or fails it at once when the communicator is broken) and returns its handle.
  uint64_t submit(std::shared_ptr<Task> t);
  /// Queues `t` and waits for it.
  Status run(std::shared_ptr<Task> t) { return wait(submit(std::move(t))); }
  std::shared_ptr<Task> makeAllReduce(AllReduceRequest request, Status &invalid);
  /// One blocking send (isSend) or receive of `bytes` bytes with `peer`, in chunks of at most
  /// kMaxChunk bytes (MPI counts are ints).
  Status pointToPoint(bool isSend, void *data, size_t bytes, int peer, int tag,
                      const std::string &what);

  // Communication thread.
  void threadMain(std::promise<Status> started);
  Status initMpi();
  Status execute(Task &t);
  /// Sends heartbeats when due and drains incoming ones.
  void heartbeat(Clock::time_point now, bool force);
  /// Watchdog verdict for the in-flight task `t` (ok while it may still complete).
  Status watchdog(const Task &t, Clock::time_point began, Clock::time_point now);
  void shutdownMpi();
  /// Parks the thread forever (abortJob owns MPI from now on).
  [[noreturn]] void park();

  CommOptions opts_;
  PollScheme poll_;
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;        ///< collectives and point-to-point
  MPI_Comm hbComm_ = MPI_COMM_NULL;      ///< heartbeats
  MPI_Comm ringComm_ = MPI_COMM_NULL;    ///< the ring all-reduce's messages
  size_t ringBytes_ = size_t{256} << 10; ///< all-reduces from this size on use the ring

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable workCv_; ///< wakes the communication thread
  std::condition_variable doneCv_; ///< wakes waiters
  std::deque<std::shared_ptr<Task>> queue_;
  std::unordered_map<uint64_t, std::shared_ptr<Task>> pending_;
  uint64_t nextHandle_ = 1;
  Status failure_; ///< the first error: the communicator is broken from then on
  bool stop_ = false;
  bool aborting_ = false;
  bool parked_ = false;
  std::condition_variable parkedCv_;
  std::atomic<int> waiters_{0}; ///< threads blocked in wait()/waitAll()
  bool oversubscribed_ = false; ///< more ranks on this host than cores
  /// At least one rank per core: every core runs a compute thread, so spinning while nobody
  /// waits would take a core from a kernel (measured: bucket launches of ~170 us on 2 ranks x 2
  /// cores); then the thread sleeps between tests from the start.
  bool everyCoreBusy_ = false;

  // Owned by the communication thread.
  uint64_t entered_ = 0;
  uint64_t completed_ = 0;
  std::vector<Clock::time_point> lastSeen_;
  std::vector<Heartbeat> peerState_;
  std::vector<MPI_Request> hbSends_;
  std::vector<Heartbeat> hbSendBufs_;
  Clock::time_point lastSent_{};
  Clock::time_point lastDrain_{};
  std::vector<std::byte> staging_;
  std::vector<std::byte> ringTmp_;
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

Status MpiCommunicator::initMpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return Status::error("MPI", "already initialized in this process (one communicator only)");
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
      (rc = MPI_Comm_dup(MPI_COMM_WORLD, &hbComm_)) != MPI_SUCCESS ||
      (rc = MPI_Comm_dup(MPI_COMM_WORLD, &ringComm_)) != MPI_SUCCESS)
    return Status::error(where(), "MPI_Comm_dup failed: " + mpiErrorString(rc));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(hbComm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(ringComm_, MPI_ERRORS_RETURN);
  if (const char *e = std::getenv("DTC_COMM_RING_BYTES"))
    ringBytes_ = static_cast<size_t>(std::strtoull(e, nullptr, 10));
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
  Clock::time_point now = Clock::now();
  lastSeen_.assign(static_cast<size_t>(size_), now);
  peerState_.assign(static_cast<size_t>(size_), Heartbeat{});
  hbSends_.assign(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  hbSendBufs_.assign(static_cast<size_t>(size_), Heartbeat{});
  lastDrain_ = now;
  return Status::ok();
}

void MpiCommunicator::threadMain(std::promise<Status> started) {
  // Precise short sleeps while polling (the default 50 us timer slack would dominate them).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  Status init = initMpi();
  started.set_value(init);
  if (!init.isOk())
    return;
  heartbeat(Clock::now(), /*force=*/true);

  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (aborting_) {
      lock.unlock();
      park();
    }
    if (!failure_.isOk()) {
      // Broken: no further MPI call; wait for the destructor or abortJob.
      workCv_.wait(lock, [&] { return stop_ || aborting_; });
      if (aborting_)
        continue;
      return;
    }
    if (queue_.empty()) {
      if (stop_)
        break;
      // Idle: sleep until work arrives, waking for the heartbeats.
      workCv_.wait_for(lock, std::chrono::duration<double>(kHeartbeatInterval));
      if (queue_.empty() && !aborting_) {
        lock.unlock();
        heartbeat(Clock::now(), false);
        lock.lock();
      }
      continue;
    }
    std::shared_ptr<Task> t = queue_.front();
    lock.unlock();
    Status s = execute(*t);
    lock.lock();
    queue_.pop_front();
    t->status = s;
    t->done = true;
    if (!s.isOk()) {
      failure_ = s;
      for (auto &q : queue_) {
        q->status = s;
        q->done = true;
      }
      queue_.clear();
    }
    doneCv_.notify_all();
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

void MpiCommunicator::heartbeat(Clock::time_point now, bool force) {
  if (size_ == 1)
    return;
  // A long gap without draining (this thread was blocked or the process stopped) says nothing
  // about the peers: give them the benefit of the doubt up to the last drain.
  if (secondsSince(lastDrain_, now) > 2 * kHeartbeatInterval)
    for (auto &t : lastSeen_)
      t = std::max(t, now - std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(kHeartbeatInterval)));
  lastDrain_ = now;
  if (force || secondsSince(lastSent_, now) >= kHeartbeatInterval) {
    lastSent_ = now;
    int64_t us =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
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
      Heartbeat &hb = hbSendBufs_[static_cast<size_t>(p)];
      hb = Heartbeat{entered_, completed_, us};
      MPI_Isend(&hb, sizeof hb, MPI_BYTE, p, kHeartbeatTag, hbComm_, &req);
    }
  }
  for (int i = 0; i < 4 * size_ + 16; ++i) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kHeartbeatTag, hbComm_, &flag, &st) != MPI_SUCCESS || !flag)
      break;
    Heartbeat hb;
    if (MPI_Recv(&hb, sizeof hb, MPI_BYTE, st.MPI_SOURCE, kHeartbeatTag, hbComm_,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
      break;
    size_t p = static_cast<size_t>(st.MPI_SOURCE);
    peerState_[p] = hb;
    lastSeen_[p] = now;
  }
}

Status MpiCommunicator::watchdog(const Task &t, Clock::time_point began, Clock::time_point now) {
  const double timeout = opts_.timeoutSeconds;
  // Peers this task depends on.
  std::vector<int> peers;
  if (t.collective) {
    for (int p = 0; p < size_; ++p)
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
  double elapsed = secondsSince(began, now);
  if (!lost.empty())
    return taskError(t, (elapsed > timeout ? "did not complete within " + fmtSeconds(timeout)
                                           : "cannot complete") +
                            ": " + lost);
  if (elapsed <= timeout)
    return Status::ok();
  std::string why;
  for (int p : peers) {
    size_t q = static_cast<size_t>(p);
    double silent = secondsSince(lastSeen_[q], now);
    if (silent > 3 * kHeartbeatInterval) {
      why += std::string(why.empty() ? "" : "; ") + "no heartbeat from rank " + std::to_string(p) +
             " for " + fmtSeconds(silent) + " (lost or stopped)";
    } else if (t.collective && peerState_[q].entered < entered_) {
      why += std::string(why.empty() ? "" : "; ") + "rank " + std::to_string(p) + " has entered " +
             std::to_string(peerState_[q].entered) + " collectives, this rank " +
             std::to_string(entered_) + ": it has not reached this collective (stuck or slow)";
    }
  }
  if (why.empty())
    why = t.collective ? "every peer is alive and has reached it (slow network or a mismatched "
                         "collective: different plans?)"
                       : "rank " + std::to_string(t.peer) + " is alive but has not matched it";
  return taskError(t, "did not complete within " + fmtSeconds(timeout) + ": " + why);
}

Status MpiCommunicator::execute(Task &t) {
  Clock::time_point began = Clock::now();
  int64_t traceBegin = opts_.tracer ? opts_.tracer->nowUs() : 0;
  if (t.collective)
    ++entered_;
  std::vector<MPI_Request> reqs;
  int rc = t.start(reqs);
  if (rc != MPI_SUCCESS) {
    // Requests already started cannot be completed safely: the communicator is broken anyway.
    return taskError(t, "MPI error: " + mpiErrorString(rc));
  }
  int64_t spinNs = everyCoreBusy_ ? 0 : poll_.spinUs * 1000;
  int64_t sleepUs = poll_.minSleepUs;
  Clock::time_point lastCheck = began;
  while (!reqs.empty()) {
    int flag = 0;
    rc = MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS)
      return taskError(t, "MPI error: " + mpiErrorString(rc));
    if (flag) {
      reqs.clear();
      if (t.next) {
        rc = t.next(reqs);
        if (rc != MPI_SUCCESS)
          return taskError(t, "MPI error: " + mpiErrorString(rc));
      }
      continue;
    }
    Clock::time_point now = Clock::now();
    if (secondsSince(lastCheck, now) >= kDrainInterval) {
      lastCheck = now;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (aborting_)
          return taskError(t, "aborted");
      }
      heartbeat(now, false);
      DTC_RETURN_IF_ERROR(watchdog(t, began, now));
    }
    if (waiters_.load(std::memory_order_relaxed) > 0) {
      if (oversubscribed_)
        std::this_thread::yield();
      sleepUs = poll_.minSleepUs;
      continue;
    }
    if (std::chrono::duration_cast<std::chrono::nanoseconds>(now - began).count() < spinNs)
      continue;
    if (sleepUs > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    else
      std::this_thread::yield();
    sleepUs = std::min(poll_.maxSleepUs, std::max<int64_t>(1, sleepUs * 2));
  }
  if (t.finish)
    t.finish();
  if (t.collective)
    ++completed_;
  if (opts_.tracer) {
    Tracer::Event e;
    e.name = t.name;
    e.category = t.kind;
    e.thread = Tracer::kComm;
    e.beginUs = traceBegin;
    e.durationUs = opts_.tracer->nowUs() - traceBegin;
    e.bytes = t.bytes;
    opts_.tracer->record(std::move(e));
  }
  // Heartbeats also go out between back-to-back collectives.
  Clock::time_point now = Clock::now();
  if (secondsSince(lastSent_, now) >= kHeartbeatInterval)
    heartbeat(now, false);
  return Status::ok();
}

void MpiCommunicator::shutdownMpi() {
  // Barrier (with the watchdog, so a lost peer cannot hang the exit), then finalize.
  auto t = std::make_shared<Task>();
  t->kind = "barrier";
  t->name = "shutdown";
  t->start = [this](std::vector<MPI_Request> &reqs) {
    reqs.emplace_back();
    return MPI_Ibarrier(comm_, &reqs.back());
  };
  Status s = execute(*t);
  if (!s.isOk()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = s;
    return; // no MPI_Finalize after a failure: it could hang
  }
  // Every rank has stopped queuing; complete the outstanding heartbeats and drain stragglers.
  for (int i = 0; i < 2000; ++i) {
    int flag = 0;
    MPI_Testall(static_cast<int>(hbSends_.size()), hbSends_.data(), &flag, MPI_STATUSES_IGNORE);
    if (flag)
      break;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  auto hb = std::make_shared<Task>();
  hb->kind = "barrier";
  hb->name = "shutdown (heartbeats)";
  hb->start = [this](std::vector<MPI_Request> &reqs) {
    reqs.emplace_back();
    return MPI_Ibarrier(hbComm_, &reqs.back());
  };
  if (!execute(*hb).isOk())
    return;
  while (true) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kHeartbeatTag, hbComm_, &flag, &st) != MPI_SUCCESS || !flag)
      break;
    Heartbeat h;
    MPI_Recv(&h, sizeof h, MPI_BYTE, st.MPI_SOURCE, kHeartbeatTag, hbComm_, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&ringComm_);
  MPI_Comm_free(&hbComm_);
  MPI_Comm_free(&comm_);
  MPI_Finalize();
}

uint64_t MpiCommunicator::submit(std::shared_ptr<Task> t) {
  bool queued = false;
  uint64_t h;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h = nextHandle_++;
    if (!t->done) {
      if (!failure_.isOk()) {
        t->status = failure_;
        t->done = true;
      } else {
        queue_.push_back(t);
        queued = true;
      }
    }
    pending_[h] = std::move(t);
  }
  // Notified after unlocking: the woken communication thread must not block on the mutex the
  // caller (the compute thread, launching a bucket) still holds.
  if (queued)
    workCv_.notify_one();
  return h;
}

Status MpiCommunicator::wait(uint64_t handle) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = pending_.find(handle);
  if (it == pending_.end()) {
    if (handle == 0 || handle >= nextHandle_)
      return Status::error(where(), "wait on unknown handle " + std::to_string(handle));
    return failure_; // completed and collected by waitAll
  }
  std::shared_ptr<Task> t = it->second;
  if (!t->done) {
    ++waiters_;
    doneCv_.wait(lock, [&] { return t->done; });
    --waiters_;
  }
  pending_.erase(handle);
  return t->status;
}

Status MpiCommunicator::waitAll() {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Task>> tasks;
  for (auto &[h, t] : pending_)
    tasks.push_back(t);
  pending_.clear();
  Status first;
  ++waiters_;
  for (const std::shared_ptr<Task> &task : tasks) {
    doneCv_.wait(lock, [&] { return task->done; });
    if (first.isOk() && !task->status.isOk())
      first = task->status;
  }
  --waiters_;
  return first.isOk() ? failure_ : first;
}

std::shared_ptr<Task> MpiCommunicator::makeAllReduce(AllReduceRequest r, Status &invalid) {
  auto t = std::make_shared<Task>();
  t->kind = "all-reduce";
  t->name = r.name;
  std::optional<DTypeInfo> info = dtypeInfo(r.dtype);
  if (!info) {
    invalid = taskError(*t, "unsupported element type (ONNX type " +
                                std::to_string(static_cast<int>(r.dtype)) +
                                "): all-reduce takes f32, f64, i32, i64");
    return t;
  }
  if (r.op == ReduceOp::kMean && !info->floating) {
    invalid = taskError(*t, std::string("mean of ") + info->name +
                                " is not supported (integer division): use sum");
    return t;
  }
  if (r.outputs.size() != r.bytes.size() || r.inputs.size() != r.bytes.size()) {
    invalid = taskError(*t, "inputs, outputs and bytes differ in length");
    return t;
  }
  struct Piece {
    std::byte *out;
    size_t bytes;
  };
  std::vector<Piece> pieces;
  uint64_t total = 0;
  for (size_t i = 0; i < r.bytes.size(); ++i) {
    if (r.bytes[i] % info->size != 0) {
      invalid =
          taskError(*t, "operand " + std::to_string(i) + " has " + std::to_string(r.bytes[i]) +
                            " bytes, not a multiple of " + std::to_string(info->size));
      return t;
    }
    if (r.bytes[i] == 0)
      continue;
    pieces.push_back({static_cast<std::byte *>(r.outputs[i]), r.bytes[i]});
    total += r.bytes[i];
  }
  t->bytes = total;
  // One span when the outputs, sorted by address, are at most 63 bytes apart (alignment padding,
  // reduced too) with gaps of whole elements. The choice depends on the layout, so every rank
  // must pass the same relative layout (the executor's arena does: same plan, 64-byte aligned
  // base); the staging path packs in request order, which does not depend on addresses.
  std::vector<Piece> sorted = pieces;
  std::sort(sorted.begin(), sorted.end(),
            [](const Piece &a, const Piece &b) { return a.out < b.out; });
  bool contiguous = true;
  for (size_t i = 1; i < sorted.size(); ++i) {
    std::byte *end = sorted[i - 1].out + sorted[i - 1].bytes;
    if (sorted[i].out < end || sorted[i].out - end >= 64 ||
        static_cast<size_t>(sorted[i].out - end) % info->size != 0)
      contiguous = false;
  }
  size_t elem = info->size;
  MPI_Datatype mt = info->mpi;
  ir::DType dtype = r.dtype;
  bool mean = r.op == ReduceOp::kMean;
  auto inputs = std::move(r.inputs);
  auto outputs = std::move(r.outputs);
  auto sizes = std::move(r.bytes);
  auto copyIn = [inputs, outputs, sizes]() {
    for (size_t i = 0; i < sizes.size(); ++i)
      if (inputs[i] != outputs[i] && sizes[i] > 0)
        std::memmove(outputs[i], inputs[i], sizes[i]);
  };
  auto reduceSpan = [this, mt, elem](std::byte *base, size_t bytes,
                                     std::vector<MPI_Request> &reqs) {
    size_t count = bytes / elem;
    for (size_t off = 0; off < count; off += kMaxChunk) {
      size_t n = std::min(kMaxChunk, count - off);
      reqs.emplace_back();
      int rc = MPI_Iallreduce(MPI_IN_PLACE, base + off * elem, static_cast<int>(n), mt, MPI_SUM,
                              comm_, &reqs.back());
      if (rc != MPI_SUCCESS) {
        reqs.pop_back();
        return rc;
      }
    }
    return MPI_SUCCESS;
  };
  // Large spans: a ring all-reduce of our own over non-blocking point-to-point (Open MPI's
  // MPI_Iallreduce, libnbc, takes 1.5-2.5x as long as the blocking MPI_Allreduce from 256 KiB on).
  auto ring = std::make_shared<RingState>();
  auto reduceAny = [this, reduceSpan, ring, elem, mt, dtype](std::byte *base, size_t bytes,
                                                             std::vector<MPI_Request> &reqs) {
    const size_t count = bytes / elem;
    if (bytes < ringBytes_ || count < static_cast<size_t>(size_) ||
        count / static_cast<size_t>(size_) >= kMaxChunk)
      return reduceSpan(base, bytes, reqs);
    ring->begin(base, count, elem, mt, dtype, rank_, size_, ringComm_, ringTmp_);
    return ring->step(reqs);
  };
  t->next = [ring](std::vector<MPI_Request> &reqs) {
    return ring->active ? ring->step(reqs) : MPI_SUCCESS;
  };
  if (pieces.empty()) {
    t->start = [copyIn](std::vector<MPI_Request> &) {
      copyIn();
      return MPI_SUCCESS;
    };
    return t;
  }
  if (contiguous) {
    std::byte *base = sorted.front().out;
    size_t span = static_cast<size_t>(sorted.back().out + sorted.back().bytes - base);
    t->start = [copyIn, reduceAny, base, span, this](std::vector<MPI_Request> &reqs) {
      copyIn();
      return size_ == 1 ? MPI_SUCCESS : reduceAny(base, span, reqs);
    };
    if (mean)
      t->finish = [this, base, span, elem, dtype]() { divideBy(base, span / elem, dtype, size_); };
    return t;
  }
  t->start = [this, copyIn, reduceAny, pieces, total](std::vector<MPI_Request> &reqs) {
    copyIn();
    if (size_ == 1)
      return MPI_SUCCESS;
    staging_.resize(total);
    size_t off = 0;
    for (const Piece &p : pieces) {
      std::memcpy(staging_.data() + off, p.out, p.bytes);
      off += p.bytes;
    }
    return reduceAny(staging_.data(), total, reqs);
  };
  t->finish = [this, pieces, mean, elem, dtype]() {
    if (size_ == 1) {
      return; // a mean over one rank is the value itself
    }
    if (mean)
      divideBy(staging_.data(), staging_.size() / elem, dtype, size_);
    size_t off = 0;
    for (const Piece &p : pieces) {
      std::memcpy(p.out, staging_.data() + off, p.bytes);
      off += p.bytes;
    }
  };
  return t;
}

uint64_t MpiCommunicator::allReduceAsync(AllReduceRequest request) {
  Status invalid;
  std::shared_ptr<Task> t = makeAllReduce(std::move(request), invalid);
  if (!invalid.isOk()) {
    // A malformed request is refused on every rank alike (same plan): the communicator stays
    // usable.
    t->status = invalid;
    t->done = true;
  }
  return submit(std::move(t));
}

Status MpiCommunicator::allReduce(void *data, size_t count, ir::DType dtype, ReduceOp op,
                                  const std::string &what) {
  AllReduceRequest r;
  r.name = what;
  r.dtype = dtype;
  r.op = op;
  std::optional<DTypeInfo> info = dtypeInfo(dtype);
  r.inputs = {data};
  r.outputs = {data};
  r.bytes = {count * (info ? info->size : 1)};
  return wait(allReduceAsync(std::move(r)));
}

Status MpiCommunicator::broadcast(void *data, size_t bytes, int root, const std::string &what) {
  auto t = std::make_shared<Task>();
  t->kind = "broadcast";
  t->name = what;
  t->bytes = bytes;
  if (root < 0 || root >= size_)
    return taskError(*t, "root rank " + std::to_string(root) + " is outside the job (size " +
                             std::to_string(size_) + ")");
  t->start = [this, data, bytes, root](std::vector<MPI_Request> &reqs) {
    for (size_t off = 0; off < bytes; off += kMaxChunk) {
      reqs.emplace_back();
      int rc = MPI_Ibcast(static_cast<std::byte *>(data) + off,
                          static_cast<int>(std::min(kMaxChunk, bytes - off)), MPI_BYTE, root, comm_,
                          &reqs.back());
      if (rc != MPI_SUCCESS)
        return rc;
    }
    return MPI_SUCCESS;
  };
  return run(std::move(t));
}

Status MpiCommunicator::allGather(const void *send, size_t bytes, void *recv,
                                  const std::string &what) {
  auto t = std::make_shared<Task>();
  t->kind = "all-gather";
  t->name = what;
  t->bytes = bytes * static_cast<size_t>(size_);
  if (bytes > static_cast<size_t>(INT_MAX))
    return taskError(*t, std::to_string(bytes) + " bytes per rank: at most 2 GiB");
  t->start = [this, send, bytes, recv](std::vector<MPI_Request> &reqs) {
    reqs.emplace_back();
    return MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes),
                          MPI_BYTE, comm_, &reqs.back());
  };
  return run(std::move(t));
}

Status MpiCommunicator::reduceScatter(const void *send, void *recv, size_t count, ir::DType dtype,
                                      ReduceOp op, const std::string &what) {
  auto t = std::make_shared<Task>();
  t->kind = "reduce-scatter";
  t->name = what;
  std::optional<DTypeInfo> info = dtypeInfo(dtype);
  if (!info)
    return taskError(*t, "unsupported element type (ONNX type " +
                             std::to_string(static_cast<int>(dtype)) + ")");
  if (op == ReduceOp::kMean && !info->floating)
    return taskError(*t, std::string("mean of ") + info->name + " is not supported: use sum");
  if (count > static_cast<size_t>(INT_MAX))
    return taskError(*t, std::to_string(count) + " elements per rank: at most 2^31 - 1");
  t->bytes = count * info->size * static_cast<size_t>(size_);
  MPI_Datatype mt = info->mpi;
  t->start = [this, send, recv, count, mt](std::vector<MPI_Request> &reqs) {
    reqs.emplace_back();
    return MPI_Ireduce_scatter_block(send, recv, static_cast<int>(count), mt, MPI_SUM, comm_,
                                     &reqs.back());
  };
  if (op == ReduceOp::kMean)
    t->finish = [this, recv, count, dtype]() { divideBy(recv, count, dtype, size_); };
  return run(std::move(t));
}

Status MpiCommunicator::pointToPoint(bool isSend, void *data, size_t bytes, int peer, int tag,
                                     const std::string &what) {
  auto t = std::make_shared<Task>();
  t->kind = isSend ? "send" : "recv";
  t->name = what;
  t->bytes = bytes;
  t->collective = false;
  t->peer = peer;
  if (peer < 0 || peer >= size_ || peer == rank_)
    return taskError(*t, "peer rank " + std::to_string(peer) + " is not another rank of the job");
  if (tag < 0 || tag > 32767)
    return taskError(*t, "tag " + std::to_string(tag) + " is outside [0, 32767]");
  t->start = [this, isSend, data, bytes, peer, tag](std::vector<MPI_Request> &reqs) {
    size_t off = 0;
    do { // at least one message, so a zero-byte send still matches its recv
      reqs.emplace_back();
      std::byte *at = static_cast<std::byte *>(data) + off;
      const int n = static_cast<int>(std::min(kMaxChunk, bytes - off));
      int rc = isSend ? MPI_Isend(at, n, MPI_BYTE, peer, tag, comm_, &reqs.back())
                      : MPI_Irecv(at, n, MPI_BYTE, peer, tag, comm_, &reqs.back());
      if (rc != MPI_SUCCESS)
        return rc;
      off += kMaxChunk;
    } while (off < bytes);
    return MPI_SUCCESS;
  };
  return run(std::move(t));
}

Status MpiCommunicator::barrier(const std::string &what) {
  auto t = std::make_shared<Task>();
  t->kind = "barrier";
  t->name = what;
  t->start = [this](std::vector<MPI_Request> &reqs) {
    reqs.emplace_back();
    return MPI_Ibarrier(comm_, &reqs.back());
  };
  return run(std::move(t));
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
  {
    std::unique_lock<std::mutex> lock(mu_);
    aborting_ = true;
    workCv_.notify_all();
    // The communication thread parks at its next check (it stops calling MPI); a thread blocked
    // beyond that is not waited for.
    if (thread_.joinable())
      parkedCv_.wait_for(lock, std::chrono::seconds(1), [&] { return parked_ || stop_; });
  }
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
