// MpiCommunicator (MpiCommunicator.h): start-up (MPI_Init_thread on the communication thread),
// the thread's loop, heartbeats and the watchdog, shutdown and abort, and Communicator::createMpi.
#include "runtime/comm/MpiCommunicator.h"

namespace dtc::rt::mpi {

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
  // Exchanges tag their messages with the group (10 bits) and a sequence number (20 bits).
  int *tagUb = nullptr, hasTagUb = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tagUb, &hasTagUb);
  if (hasTagUb && tagUb && *tagUb >= (1 << 30) - 1 &&
      (xch_.maxBytes > 0 || xch_.gatherMaxBytes > 0)) {
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &xchComm_)) != MPI_SUCCESS)
      return Status::error(where(), "MPI_Comm_dup failed: " + mpiErrorString(rc));
    MPI_Comm_set_errhandler(xchComm_, MPI_ERRORS_RETURN);
  }
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
  Status init = initMpi();
  // Below the compute thread: waking this thread on submit() should not take the core from the
  // thread that computes or drives MPI in wait(). By default it runs 10 nice levels below the
  // process (DTC_COMM_NICE=N: N levels). DTC_COMM_SCHED=idle puts it under SCHED_IDLE instead,
  // where a wake-up never preempts a normal thread: on 2 ranks x 2 cores, all-reduces of
  // 1-4 MiB, one submit() in ten returned after 0.35-3.8 ms at nice 10 and all within 4 us under
  // SCHED_IDLE. It is not the default because a SCHED_IDLE thread gets almost no time on
  // oversubscribed cores: with 4 ranks on 2 busy cores, background progress stalled for over
  // 20 s and a stopped rank's peers outlived --timeout. Set after MPI_Init_thread, so that the
  // threads Open MPI's runtime starts from here (process-death and abort events) keep the
  // process's policy.
  const char *nice = std::getenv("DTC_COMM_NICE");
  const char *sched = std::getenv("DTC_COMM_SCHED");
  sched_param idle{};
  if (!sched || std::string(sched) != "idle" ||
      pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) != 0) {
    const id_t tid = static_cast<id_t>(gettid());
    errno = 0;
    const int base = getpriority(PRIO_PROCESS, tid);
    if (errno == 0)
      setpriority(PRIO_PROCESS, tid, std::min(19, base + (nice ? std::atoi(nice) : 10)));
  }
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
      // Idle: sleep until work arrives, waking for the heartbeats. A large request the
      // submitting thread started itself is not in queue_: inFlightBackground_ counts it.
      workCv_.wait_for(lock, std::chrono::duration<double>(kHeartbeatInterval), [&] {
        return !queue_.empty() || inFlightBackground_.load() > 0 || stop_ || aborting() ||
               !failure_.isOk();
      });
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
  dropPersistent(0);
  for (size_t i = 1; i < groups_.size(); ++i)
    if (groups_[i]->comm != MPI_COMM_NULL) {
      MPI_Comm c = groups_[i]->comm;
      MPI_Comm_free(&c);
    }
  MPI_Op_free(&halfOps_.f16);
  MPI_Op_free(&halfOps_.bf16);
  if (xchComm_ != MPI_COMM_NULL)
    MPI_Comm_free(&xchComm_);
  MPI_Comm_free(&hbComm_);
  MPI_Comm_free(&p2pComm_);
  MPI_Comm_free(&comm_);
  MPI_Finalize();
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

} // namespace dtc::rt::mpi

namespace dtc::rt {

Expected<std::unique_ptr<Communicator>> Communicator::createMpi(const CommOptions &opts) {
  if (!(opts.timeoutSeconds > 0))
    return Status::error("communicator",
                         "timeout must be positive, got " + std::to_string(opts.timeoutSeconds));
  auto c = std::make_unique<mpi::MpiCommunicator>(opts);
  DTC_RETURN_IF_ERROR(c->start());
  return std::unique_ptr<Communicator>(std::move(c));
}

} // namespace dtc::rt
