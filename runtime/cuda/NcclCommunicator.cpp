// The NCCL device communicator (NcclCommunicator.h): bootstrap of two ncclComm_t per group (one
// for each direction of point-to-point traffic) over the host communicator, requests turned into
// NCCL calls (NcclPlan.h) on a communication stream behind an event of the compute stream,
// completion tracked by events for wait(), poll()'s timeouts and asynchronous errors, and the abort
// that breaks every communicator after a failure.
#include "runtime/cuda/NcclCommunicator.h"

#include "ops/cuda/CudaKernel.h"
#include "runtime/cuda/NcclPlan.h"

#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace dtc::rt {
namespace {

using Clock = std::chrono::steady_clock;

/// "<where>: <call> failed: <NCCL's error string> (<NCCL's last error>)".
Status ncclStatus(ncclResult_t e, ncclComm_t comm, const std::string &where, const char *call) {
  std::string what = std::string(call) + " failed: " + ncclGetErrorString(e);
  const char *last = ncclGetLastError(comm);
  if (last && *last)
    what += std::string(" (") + last + ")";
  return Status::error(where, what);
}

#define DTC_NCCL_RETURN_IF_ERROR(where, comm, call)                                                \
  do {                                                                                             \
    ncclResult_t dtc_nccl_e_ = (call);                                                             \
    if (dtc_nccl_e_ != ncclSuccess)                                                                \
      return ncclStatus(dtc_nccl_e_, comm, where, #call);                                          \
  } while (0)

std::string fmtSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

/// One group's communicator on this rank.
struct Group {
  std::vector<int> ranks;       ///< world ranks in group-rank order
  int myRank = -1;              ///< this rank's group rank; -1: not a member (no communicator)
  ncclComm_t comm = nullptr;    ///< collectives, and messages to higher group ranks
  ncclComm_t reverse = nullptr; ///< messages to lower group ranks (nccl::onReverse); size >= 2
};

/// One submitted request.
struct Request {
  std::string label; ///< "all-reduce 'bucket 0' on group dp"
  int group = 0;
  Status status;               ///< its own error (malformed, a failed call)
  cudaEvent_t done = nullptr;  ///< recorded on its stream after it; null once complete
  Clock::time_point submitted; ///< poll()'s timeout counts from here
};

/// The message that carries a group's ncclUniqueId from its first member to the others.
struct IdMessage {
  int32_t ok = 0; ///< ncclGetUniqueId succeeded on the first member (both ids)
  ncclUniqueId id{};
  ncclUniqueId reverseId{};
};

class NcclCommunicator final : public DeviceCommunicator {
public:
  NcclCommunicator(ops::cuda::CudaContext &ctx, const CommOptions &opts, int rank,
                   std::vector<std::string> groupNames)
      : ctx_(ctx), opts_(opts), rank_(rank), groupNames_(std::move(groupNames)) {}
  ~NcclCommunicator() override;

  /// Makes the stream, the ready event and the communicators (see createNcclCommunicator).
  Status init(Communicator &host, const std::vector<std::vector<int>> &groups);

  uint64_t submit(CommRequest request) override;
  Status wait(uint64_t handle) override;
  Status waitAll() override;
  Status poll() override;

private:
  std::string where() const { return "rank " + std::to_string(rank_); }
  /// Aborts every communicator (ncclCommAbort) and keeps `s` as the error of every later call;
  /// returns it (the first one, when already broken).
  Status breakWith(Status s);
  /// Enqueues `calls` of `req` on its communication stream behind the compute stream.
  Status launch(const std::vector<nccl::NcclCall> &calls, Group &g, Request &req);
  /// Returns the events of completed requests to the pool; a CUDA error breaks the
  /// communicator.
  Status retire();
  Expected<cudaEvent_t> takeEvent(const std::string &where);

  ops::cuda::CudaContext &ctx_;
  CommOptions opts_;
  int rank_ = 0;
  std::vector<std::string> groupNames_; ///< of groups 1..n (may be empty)
  std::vector<Group> groups_;
  cudaStream_t stream_ = nullptr;        ///< collectives, messages to higher group ranks
  cudaStream_t reverseStream_ = nullptr; ///< messages to lower group ranks
  cudaEvent_t ready_ = nullptr;          ///< recorded on the compute stream at each submission
  std::vector<cudaEvent_t> freeEvents_;
  std::vector<cudaEvent_t> allEvents_;
  std::deque<std::shared_ptr<Request>> inflight_;         ///< submission order
  std::map<uint64_t, std::shared_ptr<Request>> unwaited_; ///< by handle
  uint64_t next_ = 1;
  Status broken_;
  std::mutex mu_;
};

Status NcclCommunicator::init(Communicator &host, const std::vector<std::vector<int>> &groups) {
  const std::string w = where() + ": NCCL communicators";
  const int size = host.size();

  groups_.resize(groups.size() + 1);
  for (int r = 0; r < size; ++r)
    groups_[0].ranks.push_back(r);
  for (size_t g = 0; g < groups.size(); ++g)
    groups_[g + 1].ranks = groups[g];
  // Every rank learns whether any rank failed a step of the bootstrap (`failure`: this rank's
  // error, empty when none) before the next step, which would wait for it forever.
  auto agree = [&](const std::string &failure, const char *step) -> Status {
    int32_t failed = failure.empty() ? 0 : 1;
    DTC_RETURN_IF_ERROR(host.allReduce(&failed, 1, ir::DType::kInt32, ReduceOp::kSum,
                                       std::string("NCCL bootstrap: ") + step));
    if (!failure.empty())
      return Status::error(w, failure);
    if (failed)
      return Status::error(w, std::to_string(failed) + " other rank(s) failed " + step +
                                  " (see their errors)");
    return Status::ok();
  };

  // The streams and the ready event; the host communicator's groups must be these (the
  // bootstrap broadcasts run on them).
  auto setUp = [&]() -> Status {
    DTC_CUDA_RETURN_IF_ERROR("", cudaSetDevice(ctx_.device()));
    DTC_CUDA_RETURN_IF_ERROR("", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DTC_CUDA_RETURN_IF_ERROR("", cudaStreamCreateWithFlags(&reverseStream_, cudaStreamNonBlocking));
    DTC_CUDA_RETURN_IF_ERROR("", cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    return Status::ok();
  };
  std::string failure = setUp().message();
  for (size_t g = 0; g < groups_.size() && failure.empty(); ++g) {
    Group &grp = groups_[g];
    for (int r : grp.ranks)
      if (r < 0 || r >= size) {
        failure = "group " + std::to_string(g) + " " + nccl::rankList(grp.ranks) + " names rank " +
                  std::to_string(r) + " outside the world (" + std::to_string(size) + " ranks)";
        break;
      }
    grp.myRank = nccl::groupRankOf(grp.ranks, rank_);
    const int gi = static_cast<int>(g);
    if (failure.empty() &&
        (host.sizeOf(gi) != static_cast<int>(grp.ranks.size()) || host.rankIn(gi) != grp.myRank))
      failure = "group " + std::to_string(g) + " " + nccl::rankList(grp.ranks) +
                " differs from the host communicator's (" + std::to_string(host.sizeOf(gi)) +
                " ranks, this rank at " + std::to_string(host.rankIn(gi)) +
                "): call createGroups with the same lists first";
  }
  DTC_RETURN_IF_ERROR(agree(failure, "to check the groups"));

  // One unique id per group, made by its first member and broadcast over the host group, in
  // group order on every rank (so the host collectives of different groups cannot cross).
  std::vector<IdMessage> ids(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    Group &grp = groups_[g];
    if (grp.myRank < 0)
      continue;
    IdMessage &msg = ids[g];
    if (grp.myRank == 0) {
      ncclResult_t e = ncclGetUniqueId(&msg.id);
      if (e == ncclSuccess && grp.ranks.size() > 1)
        e = ncclGetUniqueId(&msg.reverseId);
      msg.ok = e == ncclSuccess;
      if (e != ncclSuccess && failure.empty())
        failure = ncclStatus(e, nullptr, "group " + std::to_string(g), "ncclGetUniqueId").message();
    }
    CommRequest r;
    r.kind = CommKind::kBroadcast;
    r.name = "NCCL unique id of group " + std::to_string(g);
    r.group = static_cast<int>(g);
    r.peer = grp.ranks[0];
    r.inputs = {&msg};
    r.outputs = {&msg};
    r.bytes = {sizeof msg};
    DTC_RETURN_IF_ERROR(host.run(std::move(r)));
    if (!msg.ok && failure.empty())
      failure = "group " + std::to_string(g) + ": ncclGetUniqueId failed on rank " +
                std::to_string(grp.ranks[0]);
  }
  DTC_RETURN_IF_ERROR(agree(failure, "to make an NCCL unique id"));

  // Several communicators on one device: their inits in one group (NCCL's rule), else the
  // first would wait for peers that are still creating another one.
  Status initError;
  // Names for NCCL_DEBUG logs ("dtc group 1", "dtc group 1 reverse"); kept until ncclGroupEnd.
  std::vector<std::string> names;
  names.reserve(2 * groups_.size());
  auto initComm = [&](ncclComm_t *comm, int n, const ncclUniqueId &id, int myRank, std::string name,
                      const std::string &site) {
    names.push_back(std::move(name));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.commName = names.back().c_str();
    ncclUniqueId copy = id;
    ncclResult_t e = ncclCommInitRankConfig(comm, n, copy, myRank, &config);
    if (e != ncclSuccess && initError.isOk())
      initError = ncclStatus(e, *comm, site, "ncclCommInitRankConfig");
  };
  ncclResult_t e = ncclGroupStart();
  if (e != ncclSuccess)
    return ncclStatus(e, nullptr, w, "ncclGroupStart");
  for (size_t g = 0; g < groups_.size(); ++g) {
    Group &grp = groups_[g];
    if (grp.myRank < 0)
      continue;
    const int n = static_cast<int>(grp.ranks.size());
    const std::string name = "dtc group " + std::to_string(g);
    const std::string site = w + ": group " + std::to_string(g) + " " + nccl::rankList(grp.ranks);
    initComm(&grp.comm, n, ids[g].id, grp.myRank, name, site);
    if (n > 1)
      initComm(&grp.reverse, n, ids[g].reverseId, grp.myRank, name + " reverse",
               site + " (reverse)");
  }
  e = ncclGroupEnd();
  if (e != ncclSuccess && initError.isOk())
    initError = ncclStatus(e, nullptr, w, "ncclGroupEnd (ncclCommInitRank of every group)");
  if (!initError.isOk()) {
    for (Group &grp : groups_)
      for (ncclComm_t *c : {&grp.comm, &grp.reverse})
        if (*c) {
          (void)ncclCommAbort(*c);
          *c = nullptr;
        }
    return initError;
  }
  return Status::ok();
}

NcclCommunicator::~NcclCommunicator() {
  if (cudaSetDevice(ctx_.device()) != cudaSuccess)
    return; // the device is gone: nothing below could succeed
  if (stream_ && reverseStream_) {
    // Let the requests in flight finish, at most timeoutSeconds; then abort them.
    auto deadline = Clock::now() + std::chrono::duration<double>(opts_.timeoutSeconds);
    bool aborted = false;
    while (cudaStreamQuery(stream_) == cudaErrorNotReady ||
           cudaStreamQuery(reverseStream_) == cudaErrorNotReady) {
      if (Clock::now() > deadline) {
        if (aborted)
          break; // even the abort did not end them: leave the stream to the process's exit
        (void)breakWith(Status::error(where(), "communication still pending at shutdown"));
        aborted = true;
        deadline = Clock::now() + std::chrono::seconds(10);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (Group &grp : groups_)
    for (ncclComm_t c : {grp.comm, grp.reverse})
      if (c)
        (void)ncclCommDestroy(c);
  for (cudaEvent_t ev : allEvents_)
    (void)cudaEventDestroy(ev);
  if (ready_)
    (void)cudaEventDestroy(ready_);
  for (cudaStream_t st : {stream_, reverseStream_})
    if (st)
      (void)cudaStreamDestroy(st);
}

Status NcclCommunicator::breakWith(Status s) {
  if (!broken_.isOk())
    return broken_;
  broken_ = std::move(s);
  for (Group &grp : groups_)
    for (ncclComm_t *c : {&grp.comm, &grp.reverse})
      if (*c) {
        (void)ncclCommAbort(*c);
        *c = nullptr;
      }
  return broken_;
}

Expected<cudaEvent_t> NcclCommunicator::takeEvent(const std::string &where) {
  if (!freeEvents_.empty()) {
    cudaEvent_t ev = freeEvents_.back();
    freeEvents_.pop_back();
    return ev;
  }
  cudaEvent_t ev = nullptr;
  DTC_CUDA_RETURN_IF_ERROR(where, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  allEvents_.push_back(ev);
  return ev;
}

Status NcclCommunicator::retire() {
  // Two streams: a later request may complete before an earlier one.
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    Request &req = **it;
    cudaError_t e = cudaEventQuery(req.done);
    if (e == cudaErrorNotReady) {
      ++it;
      continue;
    }
    if (e != cudaSuccess)
      return breakWith(ops::cuda::cudaStatus(e, where() + ": " + req.label, "cudaEventQuery"));
    freeEvents_.push_back(req.done);
    req.done = nullptr;
    it = inflight_.erase(it);
  }
  return Status::ok();
}

Status NcclCommunicator::launch(const std::vector<nccl::NcclCall> &calls, Group &g, Request &req) {
  using Kind = nccl::NcclCall::Kind;
  const std::string w = where() + ": " + req.label;
  // Point-to-point to a lower group rank (or from a higher one) on the reverse communicator
  // and its stream (a request holds one send or recv).
  const bool reverse = calls.size() == 1 && nccl::onReverse(calls[0], g.myRank);
  ncclComm_t comm = reverse ? g.reverse : g.comm;
  cudaStream_t stream = reverse ? reverseStream_ : stream_;
  DTC_CUDA_RETURN_IF_ERROR(w, cudaSetDevice(ctx_.device()));
  DTC_CUDA_RETURN_IF_ERROR(w, cudaEventRecord(ready_, ctx_.stream()));
  DTC_CUDA_RETURN_IF_ERROR(w, cudaStreamWaitEvent(stream, ready_, 0));
  DTC_ASSIGN_OR_RETURN(cudaEvent_t done, takeEvent(w));
  if (!calls.empty()) {
    DTC_NCCL_RETURN_IF_ERROR(w, comm, ncclGroupStart());
    ncclResult_t first = ncclSuccess;
    const char *firstCall = "";
    for (const nccl::NcclCall &c : calls) {
      ncclResult_t e = ncclSuccess;
      const char *name = "";
      switch (c.kind) {
      case Kind::kAllReduce:
        name = "ncclAllReduce";
        e = ncclAllReduce(c.send, c.recv, c.count, c.type, c.op, comm, stream);
        break;
      case Kind::kAllGather:
        name = "ncclAllGather";
        e = ncclAllGather(c.send, c.recv, c.count, c.type, comm, stream);
        break;
      case Kind::kReduceScatter:
        name = "ncclReduceScatter";
        e = ncclReduceScatter(c.send, c.recv, c.count, c.type, c.op, comm, stream);
        break;
      case Kind::kBroadcast:
        name = "ncclBroadcast";
        e = ncclBroadcast(c.send, c.recv, c.count, c.type, c.peer, comm, stream);
        break;
      case Kind::kSend:
        name = "ncclSend";
        e = ncclSend(c.send, c.count, c.type, c.peer, comm, stream);
        break;
      case Kind::kRecv:
        name = "ncclRecv";
        e = ncclRecv(c.recv, c.count, c.type, c.peer, comm, stream);
        break;
      }
      if (e != ncclSuccess && first == ncclSuccess) {
        first = e;
        firstCall = name;
      }
    }
    // The group is closed even after a failed call (NCCL reports most errors here).
    ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess)
      return ncclStatus(first, comm, w, firstCall);
    if (end != ncclSuccess)
      return ncclStatus(end, comm, w, "ncclGroupEnd");
  }
  cudaError_t e = cudaEventRecord(done, stream);
  if (e != cudaSuccess) {
    freeEvents_.push_back(done);
    return ops::cuda::cudaStatus(e, w, "cudaEventRecord(done, comm stream)");
  }
  req.done = done;
  return Status::ok();
}

uint64_t NcclCommunicator::submit(CommRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t handle = next_++;
  auto req = std::make_shared<Request>();
  req->group = request.group;
  req->label = std::string(commKindName(request.kind)) + " '" + request.name + "' on " +
               nccl::groupLabel(request.group, groupNames_);
  req->submitted = Clock::now();
  unwaited_[handle] = req;
  if (!broken_.isOk()) {
    req->status = broken_;
    return handle;
  }
  // Free the events of what has completed meanwhile (cheap queries, keeps the pool small).
  if (Status s = retire(); !s.isOk()) {
    req->status = s;
    return handle;
  }
  const bool known = request.group >= 0 && static_cast<size_t>(request.group) < groups_.size();
  Group *g = known ? &groups_[static_cast<size_t>(request.group)] : nullptr;
  Expected<std::vector<nccl::NcclCall>> calls =
      nccl::planRequest(request, g ? &g->ranks : nullptr, rank_);
  if (!calls) {
    req->status = Status::error(where() + ": " + req->label, calls.status().message());
    return handle;
  }
  if (!opts_.failStartOf.empty() && request.name == opts_.failStartOf) {
    req->status = breakWith(Status::error(where() + ": " + req->label,
                                          "NCCL call failed (injected: CommOptions::failStartOf)"));
    return handle;
  }
  Status s = launch(*calls, *g, *req);
  if (!s.isOk()) {
    req->status = breakWith(s);
    return handle;
  }
  inflight_.push_back(req);
  return handle;
}

Status NcclCommunicator::wait(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = unwaited_.find(handle);
  if (it == unwaited_.end())
    return Status::error(where(), "wait for unknown request handle " + std::to_string(handle) +
                                      " (never submitted, or already waited for)");
  std::shared_ptr<Request> req = std::move(it->second);
  unwaited_.erase(it);
  if (!req->status.isOk())
    return req->status;
  if (!broken_.isOk())
    return broken_;
  if (req->done)
    DTC_CUDA_RETURN_IF_ERROR(where() + ": " + req->label,
                             cudaStreamWaitEvent(ctx_.stream(), req->done, 0));
  return Status::ok();
}

Status NcclCommunicator::waitAll() {
  std::vector<uint64_t> handles;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto &[h, req] : unwaited_)
      handles.push_back(h);
  }
  Status first;
  for (uint64_t h : handles) {
    Status s = wait(h);
    if (!s.isOk() && first.isOk())
      first = s;
  }
  return first;
}

Status NcclCommunicator::poll() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.isOk())
    return broken_;
  DTC_RETURN_IF_ERROR(retire());
  for (size_t g = 0; g < groups_.size(); ++g) {
    Group &grp = groups_[g];
    ncclResult_t async = ncclSuccess;
    ncclComm_t failed = nullptr;
    for (ncclComm_t c : {grp.comm, grp.reverse}) {
      if (!c || async != ncclSuccess)
        continue;
      ncclResult_t e = ncclCommGetAsyncError(c, &async);
      if (e != ncclSuccess)
        async = e;
      if (async == ncclInProgress)
        async = ncclSuccess;
      failed = c;
    }
    if (async == ncclSuccess)
      continue;
    // Name the oldest request in flight on that group, else the group.
    std::string what = "group " + std::to_string(g) + " " + nccl::rankList(grp.ranks);
    for (const std::shared_ptr<Request> &req : inflight_)
      if (req->group == static_cast<int>(g)) {
        what = req->label;
        break;
      }
    return breakWith(ncclStatus(async, failed, where() + ": " + what, "NCCL (asynchronous)"));
  }
  if (!inflight_.empty()) {
    const Request &oldest = *inflight_.front();
    const double elapsed = std::chrono::duration<double>(Clock::now() - oldest.submitted).count();
    if (elapsed > opts_.timeoutSeconds) {
      const Group &grp = groups_[static_cast<size_t>(oldest.group)];
      return breakWith(Status::error(
          where() + ": " + oldest.label,
          "did not complete within " + fmtSeconds(opts_.timeoutSeconds) + " of its submission (" +
              fmtSeconds(elapsed) + "): a member of group " + nccl::rankList(grp.ranks) +
              " is lost, stopped, or submitted a different request (different plans?); every "
              "NCCL communicator of this rank is aborted"));
    }
  }
  return Status::ok();
}

} // namespace

Expected<std::unique_ptr<DeviceCommunicator>>
createNcclCommunicator(Communicator &host, const std::vector<std::vector<int>> &groups,
                       ops::cuda::CudaContext &ctx, const CommOptions &opts,
                       const std::vector<std::string> &groupNames) {
  auto comm = std::make_unique<NcclCommunicator>(ctx, opts, host.rank(), groupNames);
  DTC_RETURN_IF_ERROR(comm->init(host, groups));
  return std::unique_ptr<DeviceCommunicator>(std::move(comm));
}

} // namespace dtc::rt
