// MpiCommunicator (MpiCommunicator.h): submitting a request (validated against the groups and set
// up as a task) and waiting for it. The engine that starts, tests and completes tasks is in
// MpiEngine.cpp, the point-to-point exchanges in MpiExchange.cpp.
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

Status MpiCommunicator::prepareKind(Task &t) {
  CommRequest &r = t.req;
  t.name = r.name;
  t.group = r.group;
  t.kind = commKindName(r.kind);
  t.peer = r.peer;
  t.tag = r.tag;
  if (!t.g) // newTask(group) looked it up
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
    if (r.op == ReduceOp::kMax) {
      if (r.dtype == ir::DType::kFloat16 || r.dtype == ir::DType::kBFloat16)
        return taskError(t, std::string("max of ") + info->name +
                                " is not supported (reductions of 16-bit floats only sum)");
      info->sum = MPI_MAX; // the reduction operation of every MPI call of the task
    }
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

std::shared_ptr<Task> MpiCommunicator::newTask(int group) {
  std::shared_ptr<Task> t;
  std::shared_ptr<const Group> g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (group >= 0 && static_cast<size_t>(group) < groups_.size())
      g = groups_[static_cast<size_t>(group)];
    if (!pool_.empty()) {
      t = std::move(pool_.back());
      pool_.pop_back();
    }
  }
  if (!t)
    t = std::make_shared<Task>();
  t->g = std::move(g);
  return t;
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
  // Started here when the engine is free (no thread switch): its first messages leave now,
  // whether or not the communication thread gets a core soon; a small request completes in the
  // wait() on it. When the engine is busy, its holder (a waiting thread or the communication
  // thread) starts it. Taken before mu_ (the lock order), so that the task goes straight to the
  // engine's list when nothing is queued before it: one lock of mu_ per request fewer.
  const bool engine = startNow && invalid.isOk() && engine_.try_lock();
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
      if (engine && queue_.empty()) {
        toStart_.push_back(t); // after every earlier submission: none is left in queue_
      } else {
        queue_.push_back(t);
        queued_.fetch_add(1, std::memory_order_release);
      }
      inFlight_.fetch_add(1);
      queued = true;
    }
    addPending(std::move(t));
  }
  if (engine) {
    if (queued)
      pollOnce();
    engine_.unlock();
  }
  if (!queued)
    return h;
  if (wake) {
    // A large one is progressed by the communication thread while this thread computes.
    // Notified after unlocking: the woken communication thread must not block on the mutex the
    // caller (the compute thread, launching a bucket) still holds.
    wakes_.fetch_add(1, std::memory_order_relaxed);
    workCv_.notify_one();
  }
  return h;
}

uint64_t MpiCommunicator::submit(CommRequest request) {
  std::shared_ptr<Task> t = newTask(request.group);
  t->req = std::move(request);
  Status s = prepare(*t);
  const bool background = s.isOk() && t->bytes >= kBackgroundBytes;
  return enqueue(std::move(t), s, /*wake=*/background, /*startNow=*/true);
}

Status MpiCommunicator::run(CommRequest request) {
  // This thread waits at once and drives MPI itself: no need to wake the communication thread
  // (started here when the engine is free, as a small submit() is).
  std::shared_ptr<Task> t = newTask(request.group);
  t->req = std::move(request);
  Status s = prepare(*t);
  return wait(enqueue(std::move(t), s, /*wake=*/false, /*startNow=*/true));
}

Status MpiCommunicator::barrier(const std::string &what) {
  std::shared_ptr<Task> t = newTask(0);
  t->op = Op::kBarrier;
  t->kind = "barrier";
  t->name = what;
  return wait(enqueue(std::move(t), Status::ok(), /*wake=*/false, /*startNow=*/false));
}

CommStats MpiCommunicator::stats() const {
  CommStats s;
  s.persistentHits = phits_.load();
  s.persistentMisses = pmisses_.load();
  s.persistentEvictions = pevictions_.load();
  s.persistentCached = pcached_.load();
  s.threadWakes = wakes_.load();
  s.threadCompletions = threadCompletions_.load();
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

} // namespace dtc::rt::mpi
