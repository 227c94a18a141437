// gRPC parameter servers and their clients (see Service.h).
#include "runtime/ps/Service.h"

#include "compiler/support/FileIO.h"
#include "runtime/ps/ServerCore.h"
#include "runtime/ps/ps.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <csignal>
#include <cstdio>
#include <optional>
#include <thread>

namespace dtc::rt::ps {
namespace {

constexpr const char *kTokenKey = "x-dtc-job-token";
std::atomic<bool> gStop{false};

/// Compares in time independent of where the strings differ.
bool sameSecret(const std::string &a, const std::string &b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Expected<std::string> readPem(const std::string &path, const char *flag) {
  return readInputFile(path, flag, 1 << 20);
}

grpc::Status toGrpc(const Status &s) {
  return s.isOk() ? grpc::Status::OK
                  : grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, s.message());
}

class ServiceImpl final : public dtc::ps::ParameterServer::Service {
public:
  ServiceImpl(ServerCore &core, std::string token, std::string fingerprint, double heartbeatTimeout)
      : core_(core), token_(std::move(token)), fingerprint_(std::move(fingerprint)),
        heartbeatTimeout_(heartbeatTimeout) {}

  grpc::Status Join(grpc::ServerContext *ctx, const dtc::ps::JoinRequest *req,
                    dtc::ps::JoinReply *reply) override {
    if (grpc::Status a = admit(ctx, req->fingerprint(), req->worker()); !a.ok())
      return a;
    uint64_t incarnation = 0;
    auto step = core_.join(req->worker(), incarnation);
    if (!step)
      return toGrpc(step.status());
    reply->set_step(*step);
    reply->set_version(core_.version());
    reply->set_incarnation(incarnation);
    reply->set_heartbeat_timeout(heartbeatTimeout_);
    reply->set_server(core_.server());
    return grpc::Status::OK;
  }

  grpc::Status Pull(grpc::ServerContext *ctx, const dtc::ps::PullRequest *req,
                    dtc::ps::PullReply *reply) override {
    if (grpc::Status a = admit(ctx, req->fingerprint(), req->worker(), req->incarnation()); !a.ok())
      return a;
    bool ready = false;
    int64_t version = 0;
    std::vector<ShardBytes> values;
    Status s = core_.pull(req->worker(), req->step(), std::chrono::milliseconds(200), ready, values,
                          version);
    if (!s.isOk())
      return toGrpc(s);
    reply->set_ready(ready);
    reply->set_version(version);
    for (ShardBytes &v : values) {
      dtc::ps::Shard *sh = reply->add_shards();
      sh->set_shard(v.shard);
      sh->set_data(std::move(v.bytes));
    }
    return grpc::Status::OK;
  }

  grpc::Status Push(grpc::ServerContext *ctx, const dtc::ps::PushRequest *req,
                    dtc::ps::PushReply *reply) override {
    if (grpc::Status a = admit(ctx, req->fingerprint(), req->worker(), req->incarnation()); !a.ok())
      return a;
    std::vector<ShardBytes> grads;
    for (const dtc::ps::Shard &g : req->gradients())
      grads.push_back({g.shard(), g.data()});
    int64_t version = 0, next = 0;
    Status s = core_.push(req->worker(), req->step(), req->lr(), grads, version, next);
    if (!s.isOk())
      return toGrpc(s);
    reply->set_version(version);
    reply->set_next_step(next);
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext *ctx, const dtc::ps::HeartbeatRequest *req,
                         dtc::ps::HeartbeatReply *reply) override {
    if (grpc::Status a = admit(ctx, req->fingerprint(), req->worker(), req->incarnation()); !a.ok())
      return a;
    Status s = core_.heartbeat(req->worker(), req->done());
    reply->set_finished(core_.finished());
    return toGrpc(s);
  }

private:
  /// The token and the plan come first: a caller outside the job learns nothing else.
  /// Then, for calls after a join, the worker's incarnation.
  grpc::Status admit(grpc::ServerContext *ctx, const std::string &fingerprint, int worker,
                     std::optional<uint64_t> incarnation = std::nullopt) {
    const auto &md = ctx->client_metadata();
    auto it = md.find(kTokenKey);
    if (it == md.end() || !sameSecret(std::string(it->second.data(), it->second.size()), token_))
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "the call does not carry this job's token");
    if (fingerprint != fingerprint_)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "the caller runs another plan (fingerprint " + fingerprint.substr(0, 16) +
                              ", this server's " + fingerprint_.substr(0, 16) + ")");
    if (worker < 0 || worker >= core_.workers())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "worker " + std::to_string(worker) +
                                                                  " is not one of the plan's " +
                                                                  std::to_string(core_.workers()));
    if (incarnation)
      if (Status i = core_.checkIncarnation(worker, *incarnation); !i.isOk())
        return toGrpc(i);
    return grpc::Status::OK;
  }

  ServerCore &core_;
  const std::string token_, fingerprint_;
  const double heartbeatTimeout_;
};

Status checkCluster(const plan::Plan &plan, const Cluster &c) {
  const plan::ParameterHostInfo &host = plan.parameter_host();
  if (!plan.has_parameter_host() || host.kind() != plan::ParameterHostInfo::PARAMETER_SERVERS)
    return Status::error("the plan is not a parameter-server plan (--strategy ps=S:W)");
  if (static_cast<int>(c.servers.size()) != host.servers_size() ||
      static_cast<int>(c.workers.size()) != host.workers())
    return Status::error("cluster",
                         "has " + std::to_string(c.servers.size()) + " ps and " +
                             std::to_string(c.workers.size()) +
                             " workers; the plan is for ps=" + std::to_string(host.servers_size()) +
                             ":" + std::to_string(host.workers()));
  return Status::ok();
}

class GrpcClient final : public ParameterClient {
public:
  GrpcClient(const plan::Plan &plan, const Cluster &c, const ServiceOptions &o,
             std::vector<WorkerShard> shards, std::shared_ptr<grpc::ChannelCredentials> creds)
      : cluster_(c), opts_(o), fingerprint_(plan::fingerprint(plan)), worker_(c.taskIndex),
        shards_(std::move(shards)) {
    grpc::ChannelArguments args;
    // Reconnect quickly: a worker may start before its servers listen (gRPC's default backoff
    // grows from 1 s to 120 s).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetMaxReceiveMessageSize(INT_MAX);
    args.SetMaxSendMessageSize(INT_MAX);
    for (const std::string &addr : c.servers)
      stubs_.push_back(
          dtc::ps::ParameterServer::NewStub(grpc::CreateCustomChannel(addr, creds, args)));
  }
  ~GrpcClient() override {
    stopHeartbeats();
    if (finished_ || !joined_)
      return;
    // A worker that ends on an error leaves at once (best effort, no retries), so that
    // synchronous steps need not wait for its heartbeat timeout.
    for (size_t s = 0; s < stubs_.size(); ++s) {
      auto &stub = stubs_[s];
      auto req = header<dtc::ps::HeartbeatRequest>(s);
      req.set_done(true);
      dtc::ps::HeartbeatReply reply;
      grpc::ClientContext ctx;
      ctx.AddMetadata(kTokenKey, opts_.token);
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
      (void)stub->Heartbeat(&ctx, req, &reply);
    }
  }

  Expected<int64_t> join() override {
    int64_t step = -1;
    std::vector<int64_t> steps;
    incarnation_.assign(stubs_.size(), 0);
    for (size_t s = 0; s < stubs_.size(); ++s) {
      dtc::ps::JoinRequest req;
      req.set_fingerprint(fingerprint_);
      req.set_worker(worker_);
      dtc::ps::JoinReply reply;
      DTC_RETURN_IF_ERROR(call(
          s, "join", [&](grpc::ClientContext &ctx) { return stubs_[s]->Join(&ctx, req, &reply); }));
      if (reply.server() != static_cast<int>(s))
        return Status::error(who(s), "answers as server " + std::to_string(reply.server()) +
                                         ": the cluster lists the servers in another order");
      incarnation_[s] = reply.incarnation();
      steps.push_back(reply.step());
      if (reply.heartbeat_timeout() > 0)
        heartbeatTimeout_ = std::min(heartbeatTimeout_, reply.heartbeat_timeout());
      // Servers agree unless this worker died between its pushes to them: continue at the
      // earliest, so no server misses a step (a repeated push replaces the earlier one).
      step = step < 0 ? reply.step() : std::min(step, reply.step());
    }
    const int64_t most = *std::max_element(steps.begin(), steps.end());
    if (most > step + 1) {
      std::string each;
      for (size_t s = 0; s < steps.size(); ++s)
        each += (s ? ", " : "") + who(s) + " at " + std::to_string(steps[s]);
      return Status::error("worker " + std::to_string(worker_),
                           "the servers disagree on its step (" + each +
                               "): a server lost its state (restarted without its "
                               "--checkpoint-dir?); training cannot go on");
    }
    joined_ = true;
    startHeartbeats();
    return step;
  }

  Status pull(int64_t step, Executor &ex) override {
    for (size_t s = 0; s < stubs_.size(); ++s) {
      auto req = header<dtc::ps::PullRequest>(s);
      req.set_step(step);
      dtc::ps::PullReply reply;
      // Held back by the staleness bound: ask again (the server waits a little each time), as
      // long as the server answers.
      while (true) {
        DTC_RETURN_IF_ERROR(call(s, "pull", [&](grpc::ClientContext &ctx) {
          return stubs_[s]->Pull(&ctx, req, &reply);
        }));
        if (reply.ready())
          break;
      }
      std::vector<ShardBytes> values;
      for (const dtc::ps::Shard &v : reply.shards())
        values.push_back({v.shard(), v.data()});
      DTC_RETURN_IF_ERROR(writePulled(ex, shards_, values, who(s)));
    }
    return Status::ok();
  }

  Expected<int64_t> push(int64_t step, double lr, Executor &ex) override {
    int64_t next = step + 1;
    for (size_t s = 0; s < stubs_.size(); ++s) {
      DTC_ASSIGN_OR_RETURN(std::vector<ShardBytes> grads,
                           gradientsFor(ex, shards_, static_cast<int>(s)));
      auto req = header<dtc::ps::PushRequest>(s);
      req.set_step(step);
      req.set_lr(static_cast<float>(lr));
      for (ShardBytes &g : grads) {
        dtc::ps::Shard *sh = req.add_gradients();
        sh->set_shard(g.shard);
        sh->set_data(std::move(g.bytes));
      }
      dtc::ps::PushReply reply;
      DTC_RETURN_IF_ERROR(call(
          s, "push", [&](grpc::ClientContext &ctx) { return stubs_[s]->Push(&ctx, req, &reply); }));
      next = std::max(next, reply.next_step());
    }
    return next;
  }

  Status finish() override {
    stopHeartbeats();
    finished_ = true;
    for (size_t s = 0; s < stubs_.size(); ++s) {
      auto req = header<dtc::ps::HeartbeatRequest>(s);
      req.set_done(true);
      dtc::ps::HeartbeatReply reply;
      DTC_RETURN_IF_ERROR(call(s, "finish", [&](grpc::ClientContext &ctx) {
        return stubs_[s]->Heartbeat(&ctx, req, &reply);
      }));
    }
    return Status::ok();
  }

private:
  /// A request of this worker's to server `s`: the plan, the worker and its incarnation there.
  template <class Request> Request header(size_t s) const {
    Request r;
    r.set_fingerprint(fingerprint_);
    r.set_worker(worker_);
    r.set_incarnation(incarnation_[s]);
    return r;
  }

  std::string who(size_t s) const {
    return "ps:" + std::to_string(s) + " (" + cluster_.servers[s] + ")";
  }

  /// One call with the token. The call waits for the channel to (re)connect (gRPC's
  /// wait-for-ready, its reconnects backing off from 100 ms to 1 s); a transient failure is
  /// retried with exponential backoff (50 ms doubling to 2 s) until opts_.timeoutSeconds have
  /// passed, then the call fails naming the server.
  template <class F> Status call(size_t s, const char *what, F &&fn) {
    const auto begin = Clock::now();
    const auto limit = std::chrono::duration<double>(opts_.timeoutSeconds);
    auto backoff = std::chrono::milliseconds(50);
    while (true) {
      grpc::ClientContext ctx;
      ctx.AddMetadata(kTokenKey, opts_.token);
      ctx.set_wait_for_ready(true);
      const std::chrono::duration<double> spent = Clock::now() - begin;
      const std::chrono::duration<double> left = std::clamp(
          limit - spent, std::chrono::duration<double>(0.05), std::chrono::duration<double>(30));
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::milliseconds>(left));
      grpc::Status st = fn(ctx);
      if (st.ok())
        return Status::ok();
      const bool transient = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                             st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      const double waited = std::chrono::duration<double>(Clock::now() - begin).count();
      if (!transient)
        return Status::error(who(s), std::string(what) + " refused: " + st.error_message());
      if (waited >= opts_.timeoutSeconds)
        return Status::error(who(s), std::string(what) + ": no answer for " +
                                         std::to_string(static_cast<int>(waited)) +
                                         " s (--timeout): " + st.error_message());
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    }
  }

  void startHeartbeats() {
    if (heartbeat_.joinable())
      return;
    stopping_ = false;
    // Four heartbeats per timeout of the servers (the smallest they told at join).
    const auto period =
        std::chrono::duration<double>(std::clamp(heartbeatTimeout_ / 4, 0.025, 2.0));
    heartbeat_ = std::thread([this, period] {
      while (!stopping_) {
        for (size_t s = 0; s < stubs_.size() && !stopping_; ++s) {
          auto req = header<dtc::ps::HeartbeatRequest>(s);
          dtc::ps::HeartbeatReply reply;
          grpc::ClientContext ctx;
          ctx.AddMetadata(kTokenKey, opts_.token);
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::duration_cast<std::chrono::milliseconds>(period * 2));
          (void)stubs_[s]->Heartbeat(&ctx, req, &reply); // the main path reports failures
        }
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, period, [this] { return stopping_.load(); });
      }
    });
  }
  void stopHeartbeats() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (heartbeat_.joinable())
      heartbeat_.join();
  }

  const Cluster cluster_;
  const ServiceOptions opts_;
  const std::string fingerprint_;
  const int worker_;
  const std::vector<WorkerShard> shards_;
  std::vector<std::unique_ptr<dtc::ps::ParameterServer::Stub>> stubs_;
  std::thread heartbeat_;
  bool joined_ = false, finished_ = false;
  std::vector<uint64_t> incarnation_; ///< per server, from its join
  double heartbeatTimeout_ = 1e9;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

Expected<std::shared_ptr<grpc::ChannelCredentials>> clientCredentials(const ServiceOptions &o) {
  if (o.tlsCa.empty())
    return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  DTC_ASSIGN_OR_RETURN(ssl.pem_root_certs, readPem(o.tlsCa, "--tls-ca"));
  DTC_ASSIGN_OR_RETURN(ssl.pem_cert_chain, readPem(o.tlsCert, "--tls-cert"));
  DTC_ASSIGN_OR_RETURN(ssl.pem_private_key, readPem(o.tlsKey, "--tls-key"));
  return grpc::SslCredentials(ssl);
}

} // namespace

Status runServer(const plan::Plan &plan, const Cluster &cluster, const ServiceOptions &opts) {
  DTC_RETURN_IF_ERROR(checkCluster(plan, cluster));
  const std::string who = "ps:" + std::to_string(cluster.taskIndex);
  const std::string &address = cluster.servers[static_cast<size_t>(cluster.taskIndex)];
  auto core =
      ServerCore::create(plan, cluster.taskIndex, opts.executor, opts.heartbeatTimeoutSeconds);
  if (!core)
    return Status::error(who, core.status().message());
  if (!opts.checkpointDir.empty()) {
    bool restored = false;
    Status c = (*core)->enableCheckpoints(opts.checkpointDir, plan::fingerprint(plan), restored);
    if (!c.isOk())
      return Status::error(who, c.message());
    if (restored)
      std::fprintf(stderr, "%s: restored its shards from %s (after update %lld)\n", who.c_str(),
                   opts.checkpointDir.c_str(), static_cast<long long>((*core)->version()));
  }
  ServiceImpl service(**core, opts.token, plan::fingerprint(plan), opts.heartbeatTimeoutSeconds);
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!opts.tlsCa.empty()) {
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    DTC_ASSIGN_OR_RETURN(ssl.pem_root_certs, readPem(opts.tlsCa, "--tls-ca"));
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    DTC_ASSIGN_OR_RETURN(pair.cert_chain, readPem(opts.tlsCert, "--tls-cert"));
    DTC_ASSIGN_OR_RETURN(pair.private_key, readPem(opts.tlsKey, "--tls-key"));
    ssl.pem_key_cert_pairs.push_back(pair);
    creds = grpc::SslServerCredentials(ssl);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, creds, &port);
  // No second server may share the address (gRPC sets SO_REUSEPORT by default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A push holds this server's shards' gradients; nothing larger is read.
  uint64_t need = 64 << 10;
  for (int32_t id : (*core)->shards())
    need += (*core)->shardBytes(id) + 64;
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<uint64_t>(need, INT_MAX)));
  builder.SetMaxSendMessageSize(INT_MAX);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0)
    return Status::error(who, "cannot listen on " + address + " (in use, or not this host's)");
  gStop = false;
  std::signal(SIGTERM, [](int) { gStop = true; });
  std::signal(SIGINT, [](int) { gStop = true; });
  // Liveness, and the end: the chief is done and every other worker done or lost.
  while (!gStop && !(*core)->waitFinished(Clock::now() + std::chrono::milliseconds(100)))
    (*core)->checkLiveness();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  return Status::ok();
}

Expected<std::unique_ptr<ParameterClient>>
createClient(const plan::Plan &plan, const Cluster &cluster, const ServiceOptions &opts) {
  DTC_RETURN_IF_ERROR(checkCluster(plan, cluster));
  DTC_ASSIGN_OR_RETURN(std::vector<WorkerShard> shards, workerShards(plan));
  DTC_ASSIGN_OR_RETURN(auto creds, clientCredentials(opts));
  return std::unique_ptr<ParameterClient>(
      new GrpcClient(plan, cluster, opts, std::move(shards), std::move(creds)));
}

} // namespace dtc::rt::ps
