// MpiCommunicator's engine (MpiCommunicator.h): starts tasks in submission order with MPI's
// non-blocking (or persistent) calls, tests the active ones together, completes them, and breaks
// every request with the first communication failure. Submitting and waiting are in
// MpiRequests.cpp, the point-to-point exchanges in MpiExchange.cpp.
#include "runtime/comm/MpiCommunicator.h"

namespace dtc::rt::mpi {

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
  if (std::this_thread::get_id() == thread_.get_id())
    threadCompletions_.fetch_add(1, std::memory_order_relaxed);
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
      // Phase 0 sends this rank's block from the input; it is copied into the output while
      // that message travels (the copy of 512 KiB, about 20 us, no longer delays it), before
      // any later phase sends it on.
      const int rc = postExchange(t);
      const size_t b = r.bytes[0];
      std::byte *out = static_cast<std::byte *>(r.outputs[0]) + static_cast<size_t>(g.myRank) * b;
      if (rc == MPI_SUCCESS && r.inputs[0] != out)
        std::memmove(out, r.inputs[0], b);
      return rc;
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
      if (keep && t.span / elem <= kMaxChunk && t.span >= xch_.persistentAllReduceMinBytes) {
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
