// cs=N: device threads and the host's update in one process (see CentralStorage.h).
#include "runtime/ps/CentralStorage.h"

#include "runtime/ps/ServerCore.h"

#include <atomic>
#include <thread>

namespace dtc::rt::ps {
namespace {

/// A device's view of the host: the in-process ServerCore, synchronous (staleness 0).
class HostClient final : public ParameterClient {
public:
  HostClient(ServerCore &core, const std::vector<WorkerShard> &shards, int device,
             std::atomic<int> &failed)
      : core_(core), shards_(shards), device_(device), failed_(failed) {}

  Expected<int64_t> join() override {
    uint64_t incarnation = 0; // one process: no other can claim this device
    return core_.join(device_, incarnation);
  }

  Status pull(int64_t step, Executor &ex) override {
    std::vector<ShardBytes> values;
    bool ready = false;
    int64_t version = 0;
    while (!ready) {
      DTC_RETURN_IF_ERROR(stopped());
      DTC_RETURN_IF_ERROR(
          core_.pull(device_, step, std::chrono::milliseconds(100), ready, values, version));
    }
    return writePulled(ex, shards_, values, "the host");
  }

  Expected<int64_t> push(int64_t step, double lr, Executor &ex) override {
    DTC_RETURN_IF_ERROR(stopped());
    DTC_ASSIGN_OR_RETURN(std::vector<ShardBytes> grads, gradientsFor(ex, shards_, 0));
    int64_t version = 0, next = 0;
    DTC_RETURN_IF_ERROR(core_.push(device_, step, static_cast<float>(lr), grads, version, next));
    return next;
  }

  Status finish() override { return core_.heartbeat(device_, /*done=*/true); }

private:
  Status stopped() const {
    const int f = failed_.load();
    return f < 0 || f == device_ ? Status::ok()
                                 : Status::error("device " + std::to_string(f) + " failed");
  }
  ServerCore &core_;
  const std::vector<WorkerShard> &shards_;
  const int device_;
  std::atomic<int> &failed_;
};

} // namespace

Status trainCentralStorage(const plan::Plan &plan, const TrainOptions &opts) {
  const std::string where = opts.planPath.empty() ? "plan" : opts.planPath;
  if (!plan.has_parameter_host() ||
      plan.parameter_host().kind() != plan::ParameterHostInfo::CENTRAL_STORAGE)
    return Status::error(where, "is not a central-storage plan (--strategy cs=N)");
  DTC_RETURN_IF_ERROR(plan::validatePlan(plan, opts.planPath));
  if (!opts.checkpointDir.empty() || !opts.dumpGradientsPath.empty())
    return Status::error(!opts.checkpointDir.empty() ? "--checkpoint-dir" : "--dump-gradients",
                         "is not supported for central-storage plans yet");
  const int devices = plan.parameter_host().workers();
  // Each device's kernels get an equal share of the cores unless --threads says otherwise.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads =
      opts.threads > 0 ? opts.threads : std::max(1, static_cast<int>(cores) / devices);
  ExecutorOptions eo;
  eo.planPath = opts.planPath;
  eo.modelPath = opts.modelPath;
  eo.threads = threads;
  // The host never loses a device: a failed one stops the others instead.
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<ServerCore> core,
                       ServerCore::create(plan, 0, eo, /*heartbeatTimeoutSeconds=*/1e9));
  DTC_ASSIGN_OR_RETURN(std::vector<WorkerShard> shards, workerShards(plan));
  std::atomic<int> failed{-1};
  std::vector<Status> results(static_cast<size_t>(devices), Status::ok());
  std::vector<std::unique_ptr<HostClient>> clients;
  for (int d = 0; d < devices; ++d)
    clients.push_back(std::make_unique<HostClient>(*core, shards, d, failed));
  std::vector<std::thread> workers;
  for (int d = 0; d < devices; ++d)
    workers.emplace_back([&, d] {
      TrainOptions o = opts;
      o.parameters = clients[static_cast<size_t>(d)].get();
      o.workerRank = d;
      o.threads = threads;
      if (d > 0) { // device 0 reports and writes the outputs
        o.progress = nullptr;
        o.profile = nullptr;
        o.logPath.clear();
        o.exportPath.clear();
        o.saveParamsPath.clear();
        o.tracer = nullptr;
      }
      Status s = train(plan, o);
      if (!s.isOk()) {
        int none = -1;
        failed.compare_exchange_strong(none, d);
        results[static_cast<size_t>(d)] = s;
      }
    });
  for (std::thread &t : workers)
    t.join();
  const int f = failed.load();
  if (f >= 0)
    return Status::error("device " + std::to_string(f), results[static_cast<size_t>(f)].message());
  return Status::ok();
}

} // namespace dtc::rt::ps
