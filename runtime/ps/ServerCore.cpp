// A parameter server's state machine (see ServerCore.h).
#include "runtime/ps/ServerCore.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace dtc::rt::ps {

Expected<std::vector<WorkerShard>> workerShards(const plan::Plan &plan) {
  const plan::RankProgram &worker = plan.programs(0);
  std::vector<WorkerShard> out;
  for (int i = 0; i < plan.parameter_host().shards_size(); ++i) {
    const plan::ParameterShard &sh = plan.parameter_host().shards(i);
    const plan::TrainedParameter *tp = nullptr;
    for (const plan::TrainedParameter &p : worker.training().parameters())
      if (p.name() == sh.parameter())
        tp = &p;
    if (!tp) // validated
      return Status::error("shard " + std::to_string(i), "has no trained parameter");
    const plan::Buffer &b = worker.buffers(tp->buffer());
    const uint64_t rows = b.shape_size() ? static_cast<uint64_t>(b.shape(0)) : 1;
    const uint64_t rowBytes = rows ? b.size_bytes() / rows : 0;
    WorkerShard w;
    w.shard = i;
    w.server = sh.server();
    w.param = tp->buffer();
    w.gradient = tp->gradient();
    w.offset = rowBytes * static_cast<uint64_t>(sh.begin());
    w.bytes = rowBytes * static_cast<uint64_t>(sh.rows());
    out.push_back(w);
  }
  return out;
}

Status writePulled(Executor &ex, const std::vector<WorkerShard> &shards,
                   const std::vector<ShardBytes> &values, const std::string &from) {
  std::map<int, HostArray> params; // buffer -> its new bytes
  for (const ShardBytes &v : values) {
    if (v.shard < 0 || static_cast<size_t>(v.shard) >= shards.size())
      return Status::error(from, "sent shard " + std::to_string(v.shard) + ", not in the plan");
    const WorkerShard &w = shards[static_cast<size_t>(v.shard)];
    if (v.bytes.size() != w.bytes)
      return Status::error(from, "sent " + std::to_string(v.bytes.size()) + " bytes for shard " +
                                     std::to_string(v.shard) + ", expected " +
                                     std::to_string(w.bytes));
    auto it = params.find(w.param);
    if (it == params.end()) {
      DTC_ASSIGN_OR_RETURN(HostArray a, ex.readBuffer(w.param));
      it = params.emplace(w.param, std::move(a)).first;
    }
    std::memcpy(it->second.bytes.data() + w.offset, v.bytes.data(), w.bytes);
  }
  for (const auto &[b, a] : params)
    DTC_RETURN_IF_ERROR(ex.writeBuffer(b, a));
  return Status::ok();
}

Expected<std::vector<ShardBytes>> gradientsFor(Executor &ex, const std::vector<WorkerShard> &shards,
                                               int server) {
  std::map<int, HostArray> grads;
  std::vector<ShardBytes> out;
  for (const WorkerShard &w : shards) {
    if (w.server != server)
      continue;
    auto it = grads.find(w.gradient);
    if (it == grads.end()) {
      DTC_ASSIGN_OR_RETURN(HostArray a, ex.readBuffer(w.gradient));
      it = grads.emplace(w.gradient, std::move(a)).first;
    }
    out.push_back({w.shard, it->second.bytes.substr(w.offset, w.bytes)});
  }
  return out;
}

Expected<std::unique_ptr<ServerCore>> ServerCore::create(const plan::Plan &plan, int server,
                                                         ExecutorOptions eo,
                                                         double heartbeatTimeoutSeconds) {
  const plan::ParameterHostInfo &host = plan.parameter_host();
  if (!plan.has_parameter_host() || server < 0 || server >= host.servers_size())
    return Status::error("server " + std::to_string(server),
                         "the plan has " + std::to_string(host.servers_size()) + " server(s)");
  eo.program = host.servers(server).program();
  eo.comm = nullptr;
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::create(plan, eo));
  std::unique_ptr<ServerCore> core(
      new ServerCore(server, std::move(ex), heartbeatTimeoutSeconds, host.workers()));
  core->staleness_ = host.staleness();
  core->aggregate_ = host.async_rule() == plan::ParameterHostInfo::AGGREGATE;
  core->stalenessLr_ = host.async_rule() == plan::ParameterHostInfo::STALENESS_LR;
  const plan::RankProgram &rp = core->ex_->program();
  core->lrInput_ = rp.training().lr_input();
  core->stepInput_ = rp.training().step_input();
  for (const plan::TrainedParameter &tp : rp.training().parameters()) {
    core->stateBuffers_.push_back(tp.buffer());
    core->stateBuffers_.insert(core->stateBuffers_.end(), tp.state().begin(), tp.state().end());
  }
  for (int32_t id : host.servers(server).shards()) {
    const plan::ParameterShard &sh = host.shards(id);
    const plan::TrainedParameter &tp = rp.training().parameters(sh.server_parameter());
    const plan::Buffer &pb = rp.buffers(tp.buffer());
    if (pb.dtype() != static_cast<int32_t>(ir::DType::kFloat32))
      return Status::error("server " + std::to_string(server) + ": parameter '" + sh.parameter() +
                               "'",
                           "parameter servers hold f32 parameters only");
    Local l;
    l.shard = id;
    l.paramBuffer = tp.buffer();
    for (const plan::Binding &b : rp.inputs())
      if (b.buffer() == tp.gradient())
        l.gradInput = b.name();
    l.shape.assign(pb.shape().begin(), pb.shape().end());
    l.bytes = pb.size_bytes();
    core->shardIds_.push_back(id);
    core->local_.push_back(std::move(l));
  }
  return core;
}

ServerCore::ServerCore(int server, std::unique_ptr<Executor> ex, double timeout, int workers)
    : server_(server), ex_(std::move(ex)), timeout_(timeout), started_(Clock::now()),
      workers_(static_cast<size_t>(workers)) {
  for (Worker &w : workers_)
    w.lastSeen = started_;
}

uint64_t ServerCore::shardBytes(int32_t shard) const {
  for (const Local &l : local_)
    if (l.shard == shard)
      return l.bytes;
  return 0;
}

Status ServerCore::checkWorker(int worker) const {
  if (worker < 0 || worker >= static_cast<int>(workers_.size()))
    return Status::error("worker " + std::to_string(worker), "is not one of the plan's " +
                                                                 std::to_string(workers_.size()) +
                                                                 " workers");
  return Status::ok();
}

bool ServerCore::liveLocked(const Worker &w, Clock::time_point now) const {
  // A worker not seen yet has three timeouts from the server's start to show up.
  return !w.done && !w.lost && now - w.lastSeen < (w.everSeen ? timeout_ : 3 * timeout_);
}

int64_t ServerCore::version() {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

std::string ServerCore::workerState(int w) {
  std::lock_guard<std::mutex> lock(mu_);
  if (checkWorker(w).isOk() == false)
    return "unknown";
  const Worker &x = workers_[static_cast<size_t>(w)];
  return x.done ? "done" : liveLocked(x, Clock::now()) ? "live" : "lost";
}

Expected<int64_t> ServerCore::join(int worker, uint64_t &incarnation) {
  DTC_RETURN_IF_ERROR(checkWorker(worker));
  std::lock_guard<std::mutex> lock(mu_);
  DTC_RETURN_IF_ERROR(failed_);
  Worker &w = workers_[static_cast<size_t>(worker)];
  if (w.everSeen)
    std::fprintf(stderr, "ps:%d: worker %d rejoined (it had pushed %lld steps)\n", server_, worker,
                 static_cast<long long>(w.pushed));
  w.everSeen = true;
  w.incarnation =
      (static_cast<uint64_t>(Clock::now().time_since_epoch().count()) << 8) ^ (w.incarnation + 1);
  incarnation = w.incarnation;
  w.lastSeen = Clock::now();
  w.lost = false;
  w.done = false;
  if (staleness_ == 0) {
    // A rejoining worker continues at the next update; what it pushed before it was lost for
    // that step is replaced by its new push.
    w.pushed = version_;
    return version_;
  }
  return w.pushed;
}

Status ServerCore::checkIncarnation(int worker, uint64_t incarnation) {
  DTC_RETURN_IF_ERROR(checkWorker(worker));
  std::lock_guard<std::mutex> lock(mu_);
  if (workers_[static_cast<size_t>(worker)].incarnation != incarnation)
    return Status::error("worker " + std::to_string(worker),
                         workers_[static_cast<size_t>(worker)].incarnation == 0
                             ? "has not joined server " + std::to_string(server_) +
                                   " (it restarted without its state, or this is not its job)"
                             : "another process joined server " + std::to_string(server_) +
                                   " as this worker since; only one may run");
  return Status::ok();
}

bool ServerCore::pullAllowedLocked(int64_t step, Clock::time_point now) const {
  if (staleness_ == 0)
    return version_ >= step;
  if (staleness_ < 0)
    return true;
  int64_t slowest = -1;
  for (const Worker &w : workers_)
    if (liveLocked(w, now))
      slowest = slowest < 0 ? w.pushed : std::min(slowest, w.pushed);
  return slowest < 0 || step - slowest <= staleness_;
}

Status ServerCore::pull(int worker, int64_t step, std::chrono::milliseconds wait, bool &ready,
                        std::vector<ShardBytes> &values, int64_t &version) {
  DTC_RETURN_IF_ERROR(checkWorker(worker));
  std::unique_lock<std::mutex> lock(mu_);
  DTC_RETURN_IF_ERROR(failed_);
  const auto deadline = Clock::now() + wait;
  Worker &self = workers_[static_cast<size_t>(worker)];
  self.lastSeen = Clock::now();
  // A worker pulls step s after pushing step s - 1 here: a server that holds fewer of its
  // steps lost its state (restarted without --checkpoint-dir, or from another folder).
  if (step < 0 || step > self.pushed)
    return Status::error("server " + std::to_string(server_),
                         "worker " + std::to_string(worker) + " asks for step " +
                             std::to_string(step) + ", but this server has only " +
                             std::to_string(self.pushed) + " of its steps (at update " +
                             std::to_string(version_) +
                             "): the server lost its state (restarted without its "
                             "--checkpoint-dir?); training cannot go on");
  ready = pullAllowedLocked(step, Clock::now());
  while (!ready && Clock::now() < deadline) {
    changed_.wait_until(lock, deadline);
    DTC_RETURN_IF_ERROR(failed_);
    ready = pullAllowedLocked(step, Clock::now());
  }
  version = version_;
  values.clear();
  if (!ready)
    return Status::ok();
  self.pulled = version_;
  for (const Local &l : local_) {
    DTC_ASSIGN_OR_RETURN(HostArray a, ex_->readBuffer(l.paramBuffer));
    values.push_back({l.shard, std::move(a.bytes)});
  }
  return Status::ok();
}

Status ServerCore::applyLocked(const std::vector<std::vector<float>> &grads, float lr,
                               int64_t step) {
  for (size_t k = 0; k < local_.size(); ++k) {
    HostArray g;
    g.name = local_[k].gradInput;
    g.dtype = ir::DType::kFloat32;
    g.shape = local_[k].shape;
    g.bytes.assign(reinterpret_cast<const char *>(grads[k].data()), grads[k].size() * 4);
    DTC_RETURN_IF_ERROR(ex_->setInput(g));
  }
  if (!lrInput_.empty()) {
    HostArray a{lrInput_, ir::DType::kFloat32, {}, std::string(4, '\0')};
    std::memcpy(a.bytes.data(), &lr, 4);
    DTC_RETURN_IF_ERROR(ex_->setInput(a));
  }
  if (!stepInput_.empty()) {
    HostArray a{stepInput_, ir::DType::kInt64, {}, std::string(8, '\0')};
    std::memcpy(a.bytes.data(), &step, 8);
    DTC_RETURN_IF_ERROR(ex_->setInput(a));
  }
  Status ran = ex_->run();
  if (!ran.isOk())
    failed_ = Status::error("server " + std::to_string(server_), ran.message());
  ++version_;
  changed_.notify_all();
  return failed_;
}

namespace {
HostArray int64Array(const std::string &name, const std::vector<int64_t> &v) {
  HostArray a{name, ir::DType::kInt64, {static_cast<int64_t>(v.size())}, std::string()};
  a.bytes.assign(reinterpret_cast<const char *>(v.data()), v.size() * 8);
  return a;
}
std::vector<int64_t> int64Values(const HostArray &a) {
  std::vector<int64_t> v(a.bytes.size() / 8);
  std::memcpy(v.data(), a.bytes.data(), v.size() * 8);
  return v;
}
} // namespace

Status ServerCore::saveLocked() {
  if (checkpointPath_.empty())
    return Status::ok();
  std::vector<HostArray> arrays;
  for (int b : stateBuffers_) {
    DTC_ASSIGN_OR_RETURN(HostArray a, ex_->readBuffer(b));
    a.name = "state/" + ex_->program().buffers(b).name();
    arrays.push_back(std::move(a));
  }
  std::vector<int64_t> pushed, incarnations;
  for (const Worker &w : workers_) {
    pushed.push_back(w.pushed);
    incarnations.push_back(static_cast<int64_t>(w.incarnation));
  }
  // The workers' incarnations too: after a restart their calls still carry them.
  arrays.push_back(int64Array("dtc::incarnation", incarnations));
  int32_t lrBits = 0;
  std::memcpy(&lrBits, &pendingLr_, 4);
  arrays.push_back(int64Array("dtc::version", {version_, lrBits, aggregated_}));
  arrays.push_back(int64Array("dtc::pushed", pushed));
  HostArray fp{"dtc::fingerprint",
               ir::DType::kUInt8,
               {static_cast<int64_t>(fingerprint_.size())},
               fingerprint_};
  arrays.push_back(std::move(fp));
  for (const auto &[w, grads] : pending_)
    for (size_t k = 0; k < grads.size(); ++k) {
      HostArray g{"pending/" + std::to_string(w) + "/" + std::to_string(k), ir::DType::kFloat32,
                  local_[k].shape, std::string()};
      g.bytes.assign(reinterpret_cast<const char *>(grads[k].data()), grads[k].size() * 4);
      arrays.push_back(std::move(g));
    }
  if (aggregated_ > 0)
    for (size_t k = 0; k < aggSum_.size(); ++k) {
      HostArray g{"aggregate/" + std::to_string(k), ir::DType::kFloat32, local_[k].shape,
                  std::string()};
      g.bytes.assign(reinterpret_cast<const char *>(aggSum_[k].data()), aggSum_[k].size() * 4);
      arrays.push_back(std::move(g));
    }
  Status s = writeNpz(checkpointPath_, arrays);
  if (!s.isOk())
    failed_ = Status::error("server " + std::to_string(server_) + ": checkpoint", s.message());
  return failed_;
}

Status ServerCore::enableCheckpoints(const std::string &dir, const std::string &fingerprint,
                                     bool &restored) {
  std::lock_guard<std::mutex> lock(mu_);
  checkpointPath_ =
      (std::filesystem::path(dir) / ("ps-" + std::to_string(server_) + ".npz")).string();
  fingerprint_ = fingerprint;
  restored = false;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::exists(checkpointPath_, ec))
    return saveLocked();
  DTC_ASSIGN_OR_RETURN(std::vector<HostArray> arrays, readArrays(checkpointPath_));
  std::map<std::string, const HostArray *> byName;
  for (const HostArray &a : arrays)
    byName[a.name] = &a;
  auto need = [&](const std::string &name) -> Expected<const HostArray *> {
    auto it = byName.find(name);
    if (it == byName.end())
      return Status::error(checkpointPath_, "has no array '" + name + "'");
    return it->second;
  };
  DTC_ASSIGN_OR_RETURN(const HostArray *fp, need("dtc::fingerprint"));
  if (fp->bytes != fingerprint_)
    return Status::error(checkpointPath_, "is the checkpoint of another plan (fingerprint " +
                                              fp->bytes.substr(0, 16) + ", this plan's " +
                                              fingerprint_.substr(0, 16) + ")");
  DTC_ASSIGN_OR_RETURN(const HostArray *ver, need("dtc::version"));
  DTC_ASSIGN_OR_RETURN(const HostArray *pushed, need("dtc::pushed"));
  const std::vector<int64_t> v = int64Values(*ver), p = int64Values(*pushed);
  // {version, pending lr bits, held aggregate count}; checkpoints before --async-rule: 2 values.
  if (ver->dtype != ir::DType::kInt64 || (v.size() != 2 && v.size() != 3) || v[0] < 0 ||
      (v.size() == 3 && v[2] < 0) || pushed->dtype != ir::DType::kInt64 ||
      p.size() != workers_.size())
    return Status::error(checkpointPath_, "holds a malformed step record");
  for (int b : stateBuffers_) {
    DTC_ASSIGN_OR_RETURN(const HostArray *a, need("state/" + ex_->program().buffers(b).name()));
    if (a->dtype == ir::DType::kFloat32)
      for (size_t i = 0; i + 4 <= a->bytes.size(); i += 4) {
        float f;
        std::memcpy(&f, a->bytes.data() + i, 4);
        if (!std::isfinite(f))
          return Status::error(checkpointPath_, "holds NaN or infinite values in '" + a->name +
                                                    "'; refusing to restore them");
      }
    DTC_RETURN_IF_ERROR(ex_->writeBuffer(b, *a).withContext(checkpointPath_));
  }
  for (int64_t n : p)
    if (n < 0 || n > v[0] + 1)
      return Status::error(checkpointPath_, "holds a worker step count (" + std::to_string(n) +
                                                ") that does not fit its update count " +
                                                std::to_string(v[0]));
  version_ = v[0];
  const int32_t lrBits = static_cast<int32_t>(v[1]);
  std::memcpy(&pendingLr_, &lrBits, 4);
  DTC_ASSIGN_OR_RETURN(const HostArray *inc, need("dtc::incarnation"));
  const std::vector<int64_t> incs = int64Values(*inc);
  if (inc->dtype != ir::DType::kInt64 || incs.size() != workers_.size())
    return Status::error(checkpointPath_, "holds a malformed incarnation record");
  for (size_t w = 0; w < workers_.size(); ++w) {
    workers_[w].pushed = p[w];
    workers_[w].incarnation = static_cast<uint64_t>(incs[w]);
    workers_[w].everSeen = incs[w] != 0;
  }
  pending_.clear();
  aggregated_ = v.size() == 3 ? v[2] : 0;
  aggSum_.assign(aggregated_ > 0 ? local_.size() : 0, {});
  for (size_t k = 0; k < aggSum_.size(); ++k) {
    DTC_ASSIGN_OR_RETURN(const HostArray *a, need("aggregate/" + std::to_string(k)));
    if (a->dtype != ir::DType::kFloat32 || a->bytes.size() != local_[k].bytes)
      return Status::error(checkpointPath_, "holds a malformed aggregate '" + a->name + "'");
    aggSum_[k].resize(local_[k].bytes / 4);
    std::memcpy(aggSum_[k].data(), a->bytes.data(), local_[k].bytes);
  }
  for (const auto &[name, a] : byName) {
    if (name.rfind("pending/", 0) != 0)
      continue;
    const size_t slash = name.find('/', 8);
    const int w = std::atoi(name.substr(8, slash - 8).c_str());
    const size_t k = static_cast<size_t>(std::atoi(name.substr(slash + 1).c_str()));
    if (slash == std::string::npos || w < 0 || w >= workers() || k >= local_.size() ||
        a->dtype != ir::DType::kFloat32 || a->bytes.size() != local_[k].bytes)
      return Status::error(checkpointPath_, "holds a malformed pending gradient '" + name + "'");
    auto &grads = pending_[w];
    grads.resize(local_.size());
    grads[k].resize(local_[k].bytes / 4);
    std::memcpy(grads[k].data(), a->bytes.data(), local_[k].bytes);
  }
  for (const auto &[w, grads] : pending_)
    for (const auto &g : grads)
      if (g.empty())
        return Status::error(checkpointPath_, "holds an incomplete pending step");
  restored = true;
  return Status::ok();
}

Status ServerCore::maybeApplyLocked(Clock::time_point now) {
  if (staleness_ != 0) {
    if (aggregated_ == 0)
      return Status::ok();
    int64_t live = 0;
    for (const Worker &w : workers_)
      live += liveLocked(w, now) ? 1 : 0;
    if (aggregated_ < live)
      return Status::ok();
    const float n = static_cast<float>(aggregated_);
    for (auto &g : aggSum_)
      for (float &v : g)
        v /= n;
    std::vector<std::vector<float>> mean = std::move(aggSum_);
    aggSum_.clear();
    aggregated_ = 0;
    return applyLocked(mean, pendingLr_, version_);
  }
  if (pending_.empty())
    return Status::ok();
  for (size_t w = 0; w < workers_.size(); ++w)
    if (liveLocked(workers_[w], now) && !pending_.count(static_cast<int>(w)))
      return Status::ok(); // a live worker has not pushed yet
  // The mean over the workers that pushed, summed in worker order (as dp's all-reduce mean).
  std::vector<std::vector<float>> mean(local_.size());
  const float n = static_cast<float>(pending_.size());
  for (size_t k = 0; k < local_.size(); ++k) {
    mean[k].assign(local_[k].bytes / 4, 0.f);
    for (const auto &[w, grads] : pending_)
      for (size_t i = 0; i < mean[k].size(); ++i)
        mean[k][i] += grads[k][i];
    for (float &v : mean[k])
      v /= n;
  }
  pending_.clear();
  return applyLocked(mean, pendingLr_, version_);
}

Status ServerCore::push(int worker, int64_t step, float lr,
                        const std::vector<ShardBytes> &gradients, int64_t &version, int64_t &next) {
  DTC_RETURN_IF_ERROR(checkWorker(worker));
  const std::string who = "worker " + std::to_string(worker);
  if (gradients.size() != local_.size())
    return Status::error(who, "pushed " + std::to_string(gradients.size()) + " gradients; server " +
                                  std::to_string(server_) + " holds " +
                                  std::to_string(local_.size()) + " shards");
  std::vector<std::vector<float>> grads(local_.size());
  for (const ShardBytes &g : gradients) {
    auto it = std::find(shardIds_.begin(), shardIds_.end(), g.shard);
    if (it == shardIds_.end())
      return Status::error(who, "pushed shard " + std::to_string(g.shard) + ", which server " +
                                    std::to_string(server_) + " does not hold");
    const size_t k = static_cast<size_t>(it - shardIds_.begin());
    if (!grads[k].empty() || local_[k].bytes == 0)
      return Status::error(who, "pushed shard " + std::to_string(g.shard) + " twice");
    if (g.bytes.size() != local_[k].bytes)
      return Status::error(who, "pushed " + std::to_string(g.bytes.size()) + " bytes for shard " +
                                    std::to_string(g.shard) + ", expected " +
                                    std::to_string(local_[k].bytes));
    grads[k].resize(local_[k].bytes / 4);
    std::memcpy(grads[k].data(), g.bytes.data(), local_[k].bytes);
  }
  if (!(lr >= 0) || lr > 1e30f)
    return Status::error(who, "pushed a learning rate of " + std::to_string(lr));
  for (size_t k = 0; k < grads.size(); ++k)
    for (float v : grads[k])
      if (!std::isfinite(v))
        return Status::error(who, "pushed a NaN or infinite gradient for shard " +
                                      std::to_string(shardIds_[k]) +
                                      "; it is not applied (the worker's loss diverged, or its "
                                      "data hold NaN)");
  std::lock_guard<std::mutex> lock(mu_);
  DTC_RETURN_IF_ERROR(failed_);
  Worker &w = workers_[static_cast<size_t>(worker)];
  const auto now = Clock::now();
  w.lastSeen = now;
  w.lost = false;
  if (step < 0 || step > w.pushed)
    return Status::error(who, "pushed its gradient of step " + std::to_string(step) +
                                  ", but server " + std::to_string(server_) + " has only " +
                                  std::to_string(w.pushed) +
                                  " of its steps: the server lost its state (restarted without "
                                  "its --checkpoint-dir?), or the step is forged");
  next = step + 1;
  if (staleness_ == 0) {
    if (step > version_)
      return Status::error(who, "pushed its gradient of step " + std::to_string(step) +
                                    ", but server " + std::to_string(server_) + " collects step " +
                                    std::to_string(version_));
    if (step < version_) {
      // Lost and back: the others went on without it. Its gradient is dropped and it continues
      // at the current step.
      next = version_;
      w.pushed = version_;
      version = version_;
      return Status::ok();
    }
    pending_[worker] = std::move(grads);
    pendingLr_ = lr;
    w.pushed = step + 1;
    DTC_RETURN_IF_ERROR(maybeApplyLocked(now));
    DTC_RETURN_IF_ERROR(saveLocked());
  } else if (step < w.pushed) {
    // A push retried after a restart of this server that had applied it already.
    version = version_;
    return Status::ok();
  } else if (aggregate_) {
    // Asynchronous, AGGREGATE: summed in arrival order; one step per live worker's worth.
    if (aggregated_ == 0)
      aggSum_ = std::move(grads);
    else
      for (size_t k = 0; k < grads.size(); ++k)
        for (size_t i = 0; i < grads[k].size(); ++i)
          aggSum_[k][i] += grads[k][i];
    ++aggregated_;
    pendingLr_ = lr;
    w.pushed = std::max(w.pushed, step + 1);
    DTC_RETURN_IF_ERROR(maybeApplyLocked(now));
    DTC_RETURN_IF_ERROR(saveLocked());
  } else if (stalenessLr_) {
    // Asynchronous, STALENESS_LR: lr divided by the updates since this worker's pull.
    const int64_t tau = std::max<int64_t>(1, version_ - w.pulled);
    DTC_RETURN_IF_ERROR(applyLocked(grads, lr / static_cast<float>(tau), version_));
    w.pushed = std::max(w.pushed, step + 1);
    DTC_RETURN_IF_ERROR(saveLocked());
  } else {
    // Asynchronous, SCALED: applied on arrival, scaled by 1/W (TensorFlow's ParameterServerStrategy
    // sums the workers' updates; dtc scales so that W workers together take one dp step).
    const float scale = 1.0f / static_cast<float>(workers_.size());
    for (auto &g : grads)
      for (float &v : g)
        v *= scale;
    DTC_RETURN_IF_ERROR(applyLocked(grads, lr, version_));
    w.pushed = std::max(w.pushed, step + 1);
    DTC_RETURN_IF_ERROR(saveLocked());
  }
  version = version_;
  changed_.notify_all();
  return Status::ok();
}

Status ServerCore::heartbeat(int worker, bool done) {
  DTC_RETURN_IF_ERROR(checkWorker(worker));
  std::lock_guard<std::mutex> lock(mu_);
  Worker &w = workers_[static_cast<size_t>(worker)];
  w.lastSeen = Clock::now();
  w.lost = false;
  if (done)
    w.done = true;
  Status s = maybeApplyLocked(Clock::now());
  if (s.isOk() && done)
    s = saveLocked();
  changed_.notify_all();
  return s;
}

void ServerCore::checkLiveness() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Clock::now();
  bool changed = false;
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker &w = workers_[i];
    if (!w.done && !w.lost && !liveLocked(w, now)) {
      w.lost = true;
      changed = true;
      std::fprintf(stderr, "ps:%d: worker %zu lost (silent for %.1f s); %s\n", server_, i,
                   timeout_.count(),
                   staleness_ == 0 ? "synchronous steps go on without it" : "training goes on");
    }
  }
  if (changed) {
    if (maybeApplyLocked(now).isOk()) // a failure is kept in failed_
      (void)saveLocked();
    changed_.notify_all();
  }
}

bool ServerCore::finished() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!workers_[0].done)
    return false;
  const auto now = Clock::now();
  for (const Worker &w : workers_)
    if (!w.done && liveLocked(w, now))
      return false;
  return true;
}

bool ServerCore::waitFinished(Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    if (finished())
      return true;
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, std::chrono::milliseconds(100));
  }
  return finished();
}

} // namespace dtc::rt::ps
