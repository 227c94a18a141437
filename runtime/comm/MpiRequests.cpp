// MpiCommunicator (MpiCommunicator.h): submitting a request (validated against the groups and set
// up as a task), waiting for it, and the engine that starts tasks in submission order with MPI's
// non-blocking calls, tests them together and completes them.
#include "runtime/comm/MpiCommunicator.h"

namespace dtc::rt::mpi {

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
  if (t.pieces.size() > 1) {
    t.sorted.assign(t.pieces.begin(), t.pieces.end());
    std::sort(t.sorted.begin(), t.sorted.end(),
              [](const Task::Piece &a, const Task::Piece &b) { return a.out < b.out; });
  }
  const std::vector<Task::Piece> &sorted = t.pieces.size() > 1 ? t.sorted : t.pieces;
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
  Status s = prepareKind(t);
  if (s.isOk())
    t.exchange = exchangeEligible(t);
  return s;
}

bool MpiCommunicator::exchangeEligible(const Task &t) const {
  const size_t n = t.g->ranks.size();
  if (xchComm_ == MPI_COMM_NULL || n < 2 || (n & (n - 1)) != 0 || t.group >= 1024 ||
      t.bytes == 0 || t.bytes > std::min(xch_.maxBytes, size_t{1} << 30))
    return false;
  switch (t.op) {
  case Op::kAllReduce:
    return !t.pieces.empty();
  case Op::kAllGather:
  case Op::kReduceScatter:
    return t.req.bytes[0] > 0;
  default:
    return false;
  }
}

Status MpiCommunicator::prepareKind(Task &t) {
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

void Task::reset() {
  op = Op::kAllReduce;
  kind = "all-reduce";
  name.clear();
  group = 0;
  g.reset();
  collective = true;
  peer = -1;
  tag = 0;
  bytes = 0;
  req.name.clear();
  req.inputs.clear();
  req.outputs.clear();
  req.bytes.clear();
  req.persistent = false;
  info = DTypeInfo{1, MPI_BYTE, MPI_SUM, false, "bytes"};
  mean = false;
  pieces.clear();
  sorted.clear();
  contiguous = false;
  base = nullptr;
  sendBase = nullptr;
  span = 0;
  // staging keeps its bytes for the next all-reduce of scattered operands (up to a bound).
  if (staging.capacity() > (size_t{4} << 20))
    staging = {};
  chunks = 1;
  mismatch = false;
  mismatchBytes = 0;
  mismatchChunk = 0;
  exclusive = nullptr;
  breaks = false;
  pslot = -1;
  exchange = false;
  halving = false;
  phase = 0;
  phases = 0;
  xtag = 0;
  work = nullptr;
  if (scratch.capacity() > (size_t{1} << 20))
    scratch = {};
  handle = 0;
  background = false;
  reqs.clear();
  began = {};
  traceBegin = -1;
  firstWaitNs.store(0, std::memory_order_relaxed);
  done.store(false, std::memory_order_relaxed);
  status = Status::ok();
}

std::shared_ptr<Task> MpiCommunicator::newTask() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pool_.empty()) {
      std::shared_ptr<Task> t = std::move(pool_.back());
      pool_.pop_back();
      return t;
    }
  }
  return std::make_shared<Task>();
}

void MpiCommunicator::recycle(std::shared_ptr<Task> &t) {
  // Complete (done was read with acquire: the engine no longer touches it); another holder (the
  // engine's last reference going away, a concurrent waitAll) keeps it out of the pool.
  if (!t || t.use_count() != 1 || !t->done.load(std::memory_order_acquire) || pool_.size() >= 64)
    return;
  t->reset();
  pool_.push_back(std::move(t));
}

std::shared_ptr<Task> *MpiCommunicator::findPending(uint64_t handle) {
  if (pending_.empty())
    return nullptr;
  std::shared_ptr<Task> &slot = pending_[handle & (pending_.size() - 1)];
  return slot && slot->handle == handle ? &slot : nullptr;
}

void MpiCommunicator::addPending(std::shared_ptr<Task> t) {
  if (pending_.empty())
    pending_.resize(64);
  while (pending_[t->handle & (pending_.size() - 1)]) {
    // An older handle still holds the slot: double the table.
    std::vector<std::shared_ptr<Task>> grown(pending_.size() * 2);
    for (std::shared_ptr<Task> &p : pending_)
      if (p)
        grown[p->handle & (grown.size() - 1)] = std::move(p);
    pending_.swap(grown);
  }
  pending_[t->handle & (pending_.size() - 1)] = std::move(t);
  ++pendingCount_;
}

uint64_t MpiCommunicator::enqueue(std::shared_ptr<Task> t, const Status &invalid, bool wake,
                                  bool startNow) {
  uint64_t h;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    h = nextHandle_++;
    t->handle = h;
    if (!invalid.isOk()) {
      // A malformed request is refused on every rank alike (same plan): the communicator stays
      // usable.
      t->status = invalid;
      t->done.store(true);
    } else if (!failure_.isOk()) {
      t->status = failure_;
      t->done.store(true);
    } else {
      if (wake) {
        t->background = true;
        inFlightBackground_.fetch_add(1);
      }
      queue_.push_back(t);
      queued_.fetch_add(1, std::memory_order_release);
      inFlight_.fetch_add(1);
      queued = true;
    }
    addPending(std::move(t));
  }
  if (!queued)
    return h;
  if (wake) {
    // Notified after unlocking: the woken communication thread must not block on the mutex the
    // caller (the compute thread, launching a bucket) still holds.
    wakes_.fetch_add(1, std::memory_order_relaxed);
    workCv_.notify_one();
  } else if (startNow && engine_.try_lock()) {
    // A small request: started here (no thread switch); the wait() on it completes it. When the
    // engine is busy, its holder (a waiting thread or the communication thread) starts it.
    pollOnce();
    engine_.unlock();
  }
  return h;
}

uint64_t MpiCommunicator::submit(CommRequest request) {
  std::shared_ptr<Task> t = newTask();
  t->req = std::move(request);
  Status s = prepare(*t);
  const bool background = s.isOk() && t->bytes >= kBackgroundBytes;
  return enqueue(std::move(t), s, /*wake=*/background, /*startNow=*/!background);
}

Status MpiCommunicator::run(CommRequest request) {
  // This thread waits at once and drives MPI itself: no need to wake the communication thread
  // (started here when the engine is free, as a small submit() is).
  std::shared_ptr<Task> t = newTask();
  t->req = std::move(request);
  Status s = prepare(*t);
  return wait(enqueue(std::move(t), s, /*wake=*/false, /*startNow=*/true));
}

Status MpiCommunicator::barrier(const std::string &what) {
  std::shared_ptr<Task> t = newTask();
  t->op = Op::kBarrier;
  t->kind = "barrier";
  t->name = what;
  {
    std::lock_guard<std::mutex> lock(mu_);
    t->g = groups_.front();
  }
  return wait(enqueue(std::move(t), Status::ok(), /*wake=*/false, /*startNow=*/false));
}

CommStats MpiCommunicator::stats() const {
  CommStats s;
  s.persistentHits = phits_.load();
  s.persistentMisses = pmisses_.load();
  s.persistentEvictions = pevictions_.load();
  s.persistentCached = pcached_.load();
  s.threadWakes = wakes_.load();
  return s;
}

// --- waiting ------------------------------------------------------------------------------------

Status MpiCommunicator::waitTask(Task &t) {
  if (!t.done.load(std::memory_order_acquire)) {
    if (!t.collective) {
      // The watchdog times a send or recv from its first wait (collectives: from their start).
      int64_t zero = 0;
      t.firstWaitNs.compare_exchange_strong(
          zero,
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
              .count());
    }
    waiters_.fetch_add(1);
    // Drive MPI on this thread: the communication thread stands aside while a thread waits.
    while (!t.done.load(std::memory_order_acquire)) {
      if (aborting()) {
        waiters_.fetch_sub(1);
        return taskError(t, "aborted");
      }
      {
        // Blocks (instead of spinning on try_lock) while another thread polls: the holder may be
        // the communication thread, which runs at a lower priority; spinning here would take
        // the core it needs to finish its poll (measured: all-reduces of 16-64 MiB 3-9x slower
        // with try_lock on 2 ranks x 2 cores). It stands aside at its next check of waiters_.
        std::lock_guard<std::mutex> engine(engine_);
        pollOnce();
      }
      if (oversubscribed_)
        std::this_thread::yield();
    }
    if (waiters_.fetch_sub(1) == 1 && inFlightBackground_.load() > 0) {
      // Hand the large requests still in flight back to the communication thread (small ones
      // complete in their own wait(), or when it wakes for the heartbeats).
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
    std::shared_ptr<Task> *p = findPending(handle);
    if (!p) {
      if (handle == 0 || handle >= nextHandle_)
        return Status::error(where(), "wait on unknown handle " + std::to_string(handle));
      return failure_; // completed and collected by waitAll
    }
    t = *p;
  }
  Status s = waitTask(*t);
  std::lock_guard<std::mutex> lock(mu_);
  if (std::shared_ptr<Task> *p = findPending(handle)) {
    p->reset();
    --pendingCount_;
  }
  recycle(t);
  return s;
}

Status MpiCommunicator::waitAll() {
  // The tasks stay in pending_ until they are complete, so a wait(h) on another thread meanwhile
  // still finds its task and waits for it (instead of returning while MPI writes its buffers).
  std::vector<std::shared_ptr<Task>> byHandle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    byHandle.reserve(pendingCount_);
    for (const std::shared_ptr<Task> &p : pending_)
      if (p)
        byHandle.push_back(p);
  }
  std::sort(byHandle.begin(), byHandle.end(),
            [](const auto &a, const auto &b) { return a->handle < b->handle; });
  Status first;
  for (const std::shared_ptr<Task> &task : byHandle) {
    Status s = waitTask(*task);
    if (first.isOk() && !s.isOk())
      first = s;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::shared_ptr<Task> &task : byHandle) {
      if (std::shared_ptr<Task> *p = findPending(task->handle)) {
        p->reset();
        --pendingCount_;
      }
      recycle(task);
    }
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
  if (t->pslot >= 0) {
    pcache_[static_cast<size_t>(t->pslot)].busy = false;
    t->pslot = -1;
  }
  if (t->background)
    inFlightBackground_.fetch_sub(1);
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

int MpiCommunicator::lookupPersistent(const PersistentKey &key, bool &held, bool &miss) {
  // The same hits, misses and evictions on every member of the group (CommRequest::persistent):
  // they depend on the sequence of keys of this group only (at most kPersistentCacheSize entries
  // per group, the group's least recently started one evicted; other groups' requests, which
  // differ between members of a mesh, never evict it); a busy entry holds the task back
  // instead of changing them.
  constexpr size_t kNone = ~size_t{0};
  size_t victim = kNone, unused = kNone, ofGroup = 0;
  for (size_t i = 0; i < pcache_.size(); ++i) {
    PersistentEntry &e = pcache_[i];
    if (e.req == MPI_REQUEST_NULL) {
      if (!e.busy && unused == kNone)
        unused = i; // dropped, or its init failed
      continue;
    }
    if (e.key == key) {
      if (e.busy)
        held = true;
      return static_cast<int>(i);
    }
    if (e.key.group == key.group) {
      ++ofGroup;
      if (victim == kNone || e.lastStart < pcache_[victim].lastStart)
        victim = i;
    }
  }
  size_t slot = unused;
  if (ofGroup >= kPersistentCacheSize) {
    PersistentEntry &e = pcache_[victim];
    if (e.busy) {
      held = true;
      return -1;
    }
    MPI_Request_free(&e.req);
    pcached_.fetch_sub(1);
    pevictions_.fetch_add(1);
    slot = victim;
  } else if (slot == kNone) {
    pcache_.emplace_back();
    slot = pcache_.size() - 1;
  }
  miss = true;
  pcache_[slot].key = key;
  pcache_[slot].req = MPI_REQUEST_NULL;
  return static_cast<int>(slot);
}

void MpiCommunicator::dropPersistent(int fromGroup) {
  for (PersistentEntry &e : pcache_)
    if (e.key.group >= fromGroup && !e.busy && e.req != MPI_REQUEST_NULL) {
      MPI_Request_free(&e.req);
      e.key = PersistentKey{};
      e.key.op = Op::kExclusive; // matches no request
      e.lastStart = 0;
      pcached_.fetch_sub(1);
    }
}

int MpiCommunicator::startTask(Task &t, bool &held) {
  t.began = Clock::now();
  if (!opts_.failStartOf.empty() && t.name == opts_.failStartOf)
    return MPI_ERR_OTHER; // CommOptions::failStartOf (tests)
  t.traceBegin = opts_.tracer ? opts_.tracer->nowUs() : -1;
  const Group &g = *t.g;
  const int n = static_cast<int>(g.ranks.size());
  CommRequest &r = t.req;
  // Persistent collectives (CommRequest::persistent): the slot of `key`, initialized by `init`
  // on a miss, started. -1: not kept (held, or the init failed: `rc`).
  int rc = MPI_SUCCESS;
  auto persistent = [&](const PersistentKey &key, auto &&init) -> int {
    bool miss = false;
    const int slot = lookupPersistent(key, held, miss);
    if (held)
      return -1;
    PersistentEntry &e = pcache_[static_cast<size_t>(slot)];
    if (miss) {
      if ((rc = init(&e.req)) != MPI_SUCCESS) {
        e.req = MPI_REQUEST_NULL;
        e.key.op = Op::kExclusive;
        e.lastStart = 0;
        return -1;
      }
      pmisses_.fetch_add(1, std::memory_order_relaxed);
      pcached_.fetch_add(1, std::memory_order_relaxed);
    } else {
      phits_.fetch_add(1, std::memory_order_relaxed);
    }
    e.lastStart = ++pstarts_;
    return slot;
  };
  // Starts the persistent collective of `slot` for this task.
  auto startSlot = [&](int slot) -> int {
    PersistentEntry &e = pcache_[static_cast<size_t>(slot)];
    int src = MPI_Start(&e.req);
    if (src != MPI_SUCCESS)
      return src;
    e.busy = true;
    t.pslot = slot;
    t.reqs.push_back(e.req);
    return MPI_SUCCESS;
  };
  const bool keep = r.persistent && n > 1;
  if (t.collective)
    ++entered_[static_cast<size_t>(t.group)];
  if (t.exchange) {
    // Every member starts the collectives of a group in the same order: the count so far tells
    // this collective's messages from those of the collectives in flight with it.
    t.xtag = ((t.group & 1023) << 20) |
             static_cast<int>(entered_[static_cast<size_t>(t.group)] & 0xFFFFF);
    t.phase = 0;
    t.phases = 0;
    while ((1 << t.phases) < n)
      ++t.phases;
    t.halving = t.op == Op::kAllReduce && t.bytes >= xch_.halvingBytes;
    if (t.halving)
      t.phases *= 2;
    switch (t.op) {
    case Op::kAllReduce:
      if (t.contiguous) {
        if (!t.sendBase)
          for (const Task::Piece &p : t.pieces)
            if (p.in != p.out)
              std::memmove(p.out, p.in, p.bytes);
        t.work = t.base;
        t.scratch.resize(t.span);
      } else {
        t.staging.resize(t.bytes);
        size_t off = 0;
        for (const Task::Piece &p : t.pieces) {
          std::memcpy(t.staging.data() + off, p.in, p.bytes);
          off += p.bytes;
        }
        t.work = t.staging.data();
        t.scratch.resize(t.staging.size());
      }
      break;
    case Op::kAllGather: {
      const size_t b = r.bytes[0];
      std::byte *out = static_cast<std::byte *>(r.outputs[0]) + static_cast<size_t>(g.myRank) * b;
      if (r.inputs[0] != out)
        std::memmove(out, r.inputs[0], b);
      break;
    }
    case Op::kReduceScatter:
      t.scratch.resize(r.bytes[0] * static_cast<size_t>(n)); // two areas of n / 2 blocks
      break;
    default:
      break;
    }
    return postExchange(t);
  }
  // Held back: undo and retry later.
  auto hold = [&] {
    if (t.collective)
      --entered_[static_cast<size_t>(t.group)];
    return MPI_SUCCESS;
  };
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
      if (keep && t.span / elem <= kMaxChunk) {
        const void *in = t.sendBase ? t.sendBase : MPI_IN_PLACE;
        const int count = static_cast<int>(t.span / elem);
        const PersistentKey key{Op::kAllReduce, t.group,    in,         t.base,
                                t.span / elem,  t.info.mpi, t.info.sum, 0};
        const int slot = persistent(key, [&](MPI_Request *q) {
          return MPIX_Allreduce_init(in, t.base, count, t.info.mpi, t.info.sum, g.comm,
                                     MPI_INFO_NULL, q);
        });
        if (held)
          return hold();
        if (slot < 0)
          return rc;
        if (!t.sendBase)
          copyIn();
        return startSlot(slot);
      }
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
    if (keep) {
      const PersistentKey key{Op::kAllGather, t.group, in, out, b, MPI_BYTE, MPI_OP_NULL, 0};
      const int slot = persistent(key, [&](MPI_Request *q) {
        return MPIX_Allgather_init(in, static_cast<int>(b), MPI_BYTE, out, static_cast<int>(b),
                                   MPI_BYTE, g.comm, MPI_INFO_NULL, q);
      });
      if (held)
        return hold();
      return slot < 0 ? rc : startSlot(slot);
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
    // In place (inputs[0] == outputs[0]): MPI leaves this rank's block at the start.
    const void *send = in == out ? MPI_IN_PLACE : in;
    if (keep) {
      const PersistentKey key{Op::kReduceScatter, t.group,    send, out, count,
                              t.info.mpi,         t.info.sum, 0};
      const int slot = persistent(key, [&](MPI_Request *q) {
        return MPIX_Reduce_scatter_block_init(send, out, static_cast<int>(count), t.info.mpi,
                                              t.info.sum, g.comm, MPI_INFO_NULL, q);
      });
      if (held)
        return hold();
      return slot < 0 ? rc : startSlot(slot);
    }
    t.reqs.emplace_back();
    return MPI_Ireduce_scatter_block(send, out, static_cast<int>(count), t.info.mpi, t.info.sum,
                                     g.comm, &t.reqs.back());
  }
  case Op::kBroadcast: {
    const size_t b = r.bytes[0];
    std::byte *data = static_cast<std::byte *>(r.outputs[0]);
    const int root =
        static_cast<int>(std::find(g.ranks.begin(), g.ranks.end(), t.peer) - g.ranks.begin());
    if (keep && b <= kMaxChunk) {
      const PersistentKey key{Op::kBroadcast, t.group,     nullptr, data, b,
                              MPI_BYTE,       MPI_OP_NULL, root};
      const int slot = persistent(key, [&](MPI_Request *q) {
        return MPIX_Bcast_init(data, static_cast<int>(b), MPI_BYTE, root, g.comm, MPI_INFO_NULL, q);
      });
      if (held)
        return hold();
      if (slot < 0)
        return rc;
      if (root == g.myRank && r.inputs[0] && r.inputs[0] != data && b > 0)
        std::memmove(data, r.inputs[0], b);
      return startSlot(slot);
    }
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

namespace {

/// The phase-`k` view of a reduce-scatter exchange by recursive halving on `n` ranks (group
/// rank `r`, blocks of `b` bytes): before the phase this rank holds partial sums of blocks
/// [lo, lo + 2 * half); it keeps [keep, keep + half), sends [other, other + half) to `partner`
/// and receives the partner's partial sums of the kept blocks.
struct HalvingStep {
  size_t half, lo, keep, other;
  int partner;
  HalvingStep(int n, int r, int k) {
    const size_t len = static_cast<size_t>(n) >> k;
    half = len / 2;
    const size_t ur = static_cast<size_t>(r);
    lo = ur / len * len;
    keep = ur / half * half;
    other = keep == lo ? lo + half : lo;
    partner = r ^ static_cast<int>(half);
  }
};

} // namespace

namespace {

/// The bytes an all-reduce exchange reduces (its span, or its staging buffer).
size_t exchangeBytes(const Task &t) { return t.contiguous ? t.span : t.staging.size(); }

/// Byte offset of block `i` of `n` of a halving all-reduce: blocks of whole elements, as even
/// as the element count allows.
size_t blockOffset(const Task &t, size_t i, size_t n) {
  const size_t count = exchangeBytes(t) / t.info.size;
  return i * count / n * t.info.size;
}

} // namespace

int MpiCommunicator::postExchange(Task &t) {
  const Group &g = *t.g;
  const int n = static_cast<int>(g.ranks.size());
  const size_t un = static_cast<size_t>(n);
  const int r = g.myRank;
  const int k = t.phase;
  CommRequest &q = t.req;
  const std::byte *send = nullptr;
  std::byte *recv = nullptr;
  size_t sendBytes = 0, recvBytes = 0;
  int partner = r;
  switch (t.op) {
  case Op::kAllReduce:
    if (!t.halving) {
      // Recursive doubling: after phase k every rank of each aligned run of 2^(k+1) ranks holds
      // their sum (a + b on both partners: the same bits, as addition commutes).
      partner = r ^ (1 << k);
      sendBytes = recvBytes = exchangeBytes(t);
      if (k == 0 && t.sendBase) {
        send = t.sendBase; // the partner's bytes land in the output, this rank's are added later
        recv = t.work;
      } else {
        send = t.work;
        recv = t.scratch.data();
      }
    } else if (k < t.phases / 2) {
      // Reduce-scatter: the partial sums of the blocks the partner keeps, for its of ours. Each
      // block's sum is made on one rank and gathered: the same bits everywhere.
      const HalvingStep h(n, r, k);
      partner = h.partner;
      const bool fromInput = k == 0 && t.sendBase;
      send = (fromInput ? t.sendBase : t.work) + blockOffset(t, h.other, un);
      sendBytes = blockOffset(t, h.other + h.half, un) - blockOffset(t, h.other, un);
      recv = fromInput ? t.work + blockOffset(t, h.keep, un) : t.scratch.data();
      recvBytes = blockOffset(t, h.keep + h.half, un) - blockOffset(t, h.keep, un);
    } else {
      // All-gather by recursive doubling of the reduced blocks.
      const size_t d = size_t{1} << (k - t.phases / 2);
      partner = r ^ static_cast<int>(d);
      const size_t mine = static_cast<size_t>(r) / d * d;
      const size_t theirs = static_cast<size_t>(partner) / d * d;
      send = t.work + blockOffset(t, mine, un);
      sendBytes = blockOffset(t, mine + d, un) - blockOffset(t, mine, un);
      recv = t.work + blockOffset(t, theirs, un);
      recvBytes = blockOffset(t, theirs + d, un) - blockOffset(t, theirs, un);
    }
    break;
  case Op::kAllGather: {
    // Recursive doubling: the partner's run of 2^k blocks for this rank's.
    const size_t b = q.bytes[0];
    const size_t d = size_t{1} << k;
    partner = r ^ static_cast<int>(d);
    std::byte *out = static_cast<std::byte *>(q.outputs[0]);
    send = out + static_cast<size_t>(r) / d * d * b;
    recv = out + static_cast<size_t>(partner) / d * d * b;
    sendBytes = recvBytes = d * b;
    break;
  }
  case Op::kReduceScatter: {
    const size_t b = q.bytes[0];
    const HalvingStep h(n, r, k);
    const size_t areaBytes = un / 2 * b;
    const bool inPlace = q.inputs[0] == q.outputs[0];
    // Partial sums before phase k: the input (k = 0) or the area phase k - 1 wrote, which
    // holds blocks [lo, lo + 2 * half).
    const std::byte *cur = k == 0 ? static_cast<const std::byte *>(q.inputs[0])
                                  : t.scratch.data() + static_cast<size_t>((k - 1) % 2) * areaBytes;
    const size_t curBase = k == 0 ? 0 : h.lo;
    partner = h.partner;
    send = cur + (h.other - curBase) * b;
    recv = h.half == 1 && !inPlace ? static_cast<std::byte *>(q.outputs[0])
                                   : t.scratch.data() + static_cast<size_t>(k % 2) * areaBytes;
    sendBytes = recvBytes = h.half * b;
    break;
  }
  default:
    return MPI_ERR_INTERN;
  }
  const int peer = g.ranks[static_cast<size_t>(partner)];
  // The same cut on both sides: the partner sends as many bytes as this rank receives.
  auto cut = [&](size_t bytes) { return bytes > xch_.wholeAbove ? bytes : xch_.segmentBytes; };
  for (size_t off = 0, seg = cut(recvBytes); off < recvBytes; off += seg) {
    t.reqs.emplace_back();
    const int rc = MPI_Irecv(recv + off, static_cast<int>(std::min(seg, recvBytes - off)),
                             MPI_BYTE, peer, t.xtag, xchComm_, &t.reqs.back());
    if (rc != MPI_SUCCESS)
      return rc;
  }
  for (size_t off = 0, seg = cut(sendBytes); off < sendBytes; off += seg) {
    t.reqs.emplace_back();
    const int rc = MPI_Isend(send + off, static_cast<int>(std::min(seg, sendBytes - off)),
                             MPI_BYTE, peer, t.xtag, xchComm_, &t.reqs.back());
    if (rc != MPI_SUCCESS)
      return rc;
  }
  return MPI_SUCCESS;
}

int MpiCommunicator::advanceExchange(Task &t, bool &more) {
  more = false;
  const Group &g = *t.g;
  const int n = static_cast<int>(g.ranks.size());
  const size_t un = static_cast<size_t>(n);
  const int k = t.phase;
  CommRequest &q = t.req;
  const size_t elem = t.info.size;
  int rc = MPI_SUCCESS;
  switch (t.op) {
  case Op::kAllReduce:
    if (!t.halving) {
      const void *mine = k == 0 && t.sendBase ? static_cast<const void *>(t.sendBase)
                                              : static_cast<const void *>(t.scratch.data());
      rc = MPI_Reduce_local(mine, t.work, static_cast<int>(exchangeBytes(t) / elem), t.info.mpi,
                            t.info.sum);
    } else if (k < t.phases / 2) {
      const HalvingStep h(n, g.myRank, k);
      const size_t at = blockOffset(t, h.keep, un);
      const size_t bytes = blockOffset(t, h.keep + h.half, un) - at;
      const void *other = k == 0 && t.sendBase ? static_cast<const void *>(t.sendBase + at)
                                               : static_cast<const void *>(t.scratch.data());
      if (bytes > 0)
        rc = MPI_Reduce_local(other, t.work + at, static_cast<int>(bytes / elem), t.info.mpi,
                              t.info.sum);
    }
    break;
  case Op::kReduceScatter: {
    const size_t b = q.bytes[0];
    const HalvingStep h(n, g.myRank, k);
    const size_t areaBytes = un / 2 * b;
    const bool inPlace = q.inputs[0] == q.outputs[0];
    const std::byte *cur = k == 0 ? static_cast<const std::byte *>(q.inputs[0])
                                  : t.scratch.data() + static_cast<size_t>((k - 1) % 2) * areaBytes;
    const size_t curBase = k == 0 ? 0 : h.lo;
    std::byte *dest = h.half == 1 && !inPlace
                          ? static_cast<std::byte *>(q.outputs[0])
                          : t.scratch.data() + static_cast<size_t>(k % 2) * areaBytes;
    rc = MPI_Reduce_local(cur + (h.keep - curBase) * b, dest, static_cast<int>(h.half * b / elem),
                          t.info.mpi, t.info.sum);
    if (rc == MPI_SUCCESS && h.half == 1 && inPlace)
      std::memcpy(q.outputs[0], dest, b); // every send has completed: the input may change
    break;
  }
  default:
    break;
  }
  if (rc != MPI_SUCCESS)
    return rc;
  t.reqs.clear();
  if (++t.phase < t.phases) {
    more = true;
    return postExchange(t);
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
    bool held = false;
    int rc = startTask(*t, held);
    if (rc != MPI_SUCCESS) {
      // Still in toStart_: breakWith completes it with the error.
      breakWith(taskError(*t, "MPI error: " + mpiErrorString(rc)));
      return true;
    }
    if (held)
      break; // its persistent collective is busy with an earlier task: after that one
    toStart_.pop_front();
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
    if (t.exchange && t.phase < t.phases) {
      bool more = false;
      const int xrc = advanceExchange(t, more);
      if (xrc != MPI_SUCCESS) {
        breakWith(taskError(t, "MPI error: " + mpiErrorString(xrc)));
        return true;
      }
      progressed = true;
      if (more) {
        ++i;
        continue;
      }
    }
    std::shared_ptr<Task> done = std::move(active_[i]);
    active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    Status s = finishTask(t);
    complete(done, std::move(s));
    progressed = true;
  }
  // Heartbeats and the watchdog, every kDrainInterval: the clock is read on every 16th poll (a
  // thread waiting for a small request polls a few dozen times; reading the clock each time
  // took an eighth of its time).
  if ((++polls_ & 15) != 0)
    return progressed;
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

} // namespace dtc::rt::mpi
