// One parameter server's state (DESIGN.md section 6, ps=S:W; also the host of cs=N): its
// program's executor holding the shards it owns and their optimizer state, the workers' progress
// and liveness, and the rules of synchronous and bounded-staleness training. Independent of the
// transport: the gRPC service (runtime/ps/Service.h) and central storage call it directly.
//
// Rules (Ho et al. 2013, "More Effective Distributed ML via a Stale Synchronous Parameter
// Server"; TensorFlow's ParameterServerStrategy for the asynchronous case):
// - staleness 0 (synchronous): the update of step t is applied once every live worker pushed
//   its gradient of step t: the mean of those gradients (summed in worker order), i.e. dp's
//   update; a worker may pull for step t once the update of step t - 1 is applied.
// - staleness K > 0 or -1 (asynchronous): no worker waits for another's push; a worker may
//   pull for step t once t - (steps done by the slowest live worker) <= K (-1: always). How the
//   pushes update the parameters is the plan's async_rule:
//   - SCALED (default): every push is one optimizer step on its gradient scaled by 1/W
//     (TensorFlow's ParameterServerStrategy, which applies every push, with dp's scale).
//   - AGGREGATE: the pushes are summed as they arrive, whoever sent them (a fast worker
//     may add several), and once there are as many as live workers their mean is one optimizer
//     step; lost or finished workers are not waited for (their share is filled by the others, and
//     the last partial sum is applied when no live worker is left). This is TensorFlow's
//     SyncReplicasOptimizer (replicas_to_aggregate = W, stale gradients accepted) without its
//     barrier, and Chen, Pan, Monga, Bengio, Jozefowicz 2016, "Revisiting Distributed Synchronous
//     SGD" (aggregating K of N pushes): an epoch takes as many optimizer steps, on global batches
//     as large, as dp=W, which matters for Adam (invariant to a gradient's scale, so 1/W scaling
//     cannot stop W pushes from being W full Adam steps) and for momentum, which compounds
//     staleness (Mitliagkas, Zhang, Hadjis, Re 2016, "Asynchrony begets Momentum").
//     Measured on the bundled CNN it did not beat SCALED (README, "Parameter servers"): its
//     gradients are still computed on parameters about one update old, so it is an option, not
//     the default.
//   - STALENESS_LR: every push is one optimizer step on its gradient, unscaled, at learning rate
//     lr / max(1, tau), tau the updates this server applied since the worker's last pull (Zhang,
//     Gupta, Lian, Liu 2016, "Staleness-aware Async-SGD for Distributed Deep Learning").
// A worker is live while it sent anything within the heartbeat timeout (counted from the
// server's start for a worker not seen yet) and has not said it is done.
#pragma once

#include "compiler/plan/Plan.h"
#include "compiler/support/Status.h"
#include "runtime/Executor.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dtc::rt::ps {

using Clock = std::chrono::steady_clock;

/// One tensor of a pull or push: shard `shard` (an index into Plan.parameter_host.shards) and
/// its bytes (the shard's rows, row-major, f32).
struct ShardBytes {
  int32_t shard = 0;
  std::string bytes;
};

/// Where shard `shard` lives in the workers' program: rows at byte `offset` of parameter buffer
/// `param` and of its gradient buffer `gradient`, `bytes` long, held by `server`.
struct WorkerShard {
  int32_t shard = 0;
  int server = 0;
  int param = 0, gradient = 0;
  uint64_t offset = 0, bytes = 0;
};
/// Every shard of a validated parameter-host plan, in Plan.parameter_host.shards order.
Expected<std::vector<WorkerShard>> workerShards(const plan::Plan &plan);
/// Writes pulled shard values into the executor's (the workers' program's) parameters.
/// Errors: a shard unknown or of the wrong size (naming `from`).
Status writePulled(Executor &ex, const std::vector<WorkerShard> &shards,
                   const std::vector<ShardBytes> &values, const std::string &from);
/// The executor's gradients of the shards `server` holds, in shard order.
Expected<std::vector<ShardBytes>> gradientsFor(Executor &ex, const std::vector<WorkerShard> &shards,
                                               int server);

class ServerCore {
public:
  /// Loads server `server`'s program of a validated plan with a parameter host (its shards from
  /// the model, zero optimizer state). Errors: no such server, a shard that is not f32, the
  /// executor's errors.
  static Expected<std::unique_ptr<ServerCore>>
  create(const plan::Plan &plan, int server, ExecutorOptions eo, double heartbeatTimeoutSeconds);

  /// A worker (re)joins: returns the step it continues at (synchronous: the next update's step;
  /// asynchronous: the steps it has pushed so far) and its incarnation, which its later pulls
  /// and pushes carry: a second process joining as the same worker fences off the first.
  /// Errors: worker out of range.
  Expected<int64_t> join(int worker, uint64_t &incarnation);
  /// Refuses a call of `worker` that carries another incarnation than its latest join's.
  Status checkIncarnation(int worker, uint64_t incarnation);
  /// The shards' current values for `worker` about to compute `step`, when the staleness rule
  /// allows it; otherwise waits up to `wait` and sets `ready` false. `version` is the number of
  /// updates applied.
  Status pull(int worker, int64_t step, std::chrono::milliseconds wait, bool &ready,
              std::vector<ShardBytes> &values, int64_t &version);
  /// `worker`'s gradients of `step` for every shard of this server (each exactly once, of the
  /// shard's size), at learning rate `lr`. `next` is the step the worker computes next: step + 1,
  /// or, synchronous, the current step when the others already went on without this worker
  /// (the late push is dropped). Errors name the worker and shard; nothing is applied then.
  Status push(int worker, int64_t step, float lr, const std::vector<ShardBytes> &gradients,
              int64_t &version, int64_t &next);
  /// Any message from `worker` counts as a heartbeat; `done` says it finished its steps.
  Status heartbeat(int worker, bool done);
  /// Keeps this server's state in `dir`/ps-<server>.npz (written atomically after every
  /// accepted push: shards, optimizer state, the pending synchronous step's gradients, the
  /// update count and each worker's steps), and restores it first when the file exists, so that
  /// a restarted server continues where it stopped. Errors: a checkpoint of another plan
  /// (`fingerprint` differs) or of other shapes, an unreadable file.
  Status enableCheckpoints(const std::string &dir, const std::string &fingerprint, bool &restored);
  /// Marks workers silent for longer than the timeout as lost (and applies a synchronous update
  /// they held up). Called periodically by the transport.
  void checkLiveness();
  /// True once worker 0 (the chief) is done and every other worker is done or lost.
  bool finished();
  /// Blocks until finished() or `deadline`; true when finished.
  bool waitFinished(Clock::time_point deadline);

  int server() const { return server_; }
  int workers() const { return static_cast<int>(workers_.size()); }
  int64_t version();
  /// The shards this server holds (indices into Plan.parameter_host.shards), in program order.
  const std::vector<int32_t> &shards() const { return shardIds_; }
  /// Bytes of shard `shard` (which must be one of shards()).
  uint64_t shardBytes(int32_t shard) const;
  /// Worker w's state, for messages: "live", "lost", "done".
  std::string workerState(int w);

private:
  struct Worker {
    Clock::time_point lastSeen;
    bool lost = false, done = false;
    int64_t pushed = 0;       ///< steps whose gradient this server has from the worker
    int64_t pulled = 0;       ///< the version its latest pull returned (STALENESS_LR)
    uint64_t incarnation = 0; ///< of its latest join
    bool everSeen = false;
  };
  struct Local {
    int32_t shard = 0;
    int paramBuffer = 0;
    std::string gradInput; ///< the program's input binding for the pushed gradient
    std::vector<int64_t> shape;
    uint64_t bytes = 0;
  };
  ServerCore(int server, std::unique_ptr<Executor> ex, double timeout, int workers);
  bool liveLocked(const Worker &w, Clock::time_point now) const;
  bool pullAllowedLocked(int64_t step, Clock::time_point now) const;
  /// Runs the program on `grads` (one per shard, in shards() order, already scaled).
  Status applyLocked(const std::vector<std::vector<float>> &grads, float lr, int64_t step);
  /// Synchronous: applies the pending step once every live worker pushed it. Asynchronous with
  /// AGGREGATE: applies the mean of the summed pushes once there are at least as many as live
  /// workers (or any, when none is live).
  Status maybeApplyLocked(Clock::time_point now);
  Status checkWorker(int worker) const;
  Status saveLocked();

  const int server_;
  std::unique_ptr<Executor> ex_;
  const std::chrono::duration<double> timeout_;
  const Clock::time_point started_;
  int64_t staleness_ = -1;
  bool aggregate_ = false;   ///< asynchronous rule AGGREGATE
  bool stalenessLr_ = false; ///< asynchronous rule STALENESS_LR (neither: SCALED)
  std::vector<int32_t> shardIds_;
  std::vector<Local> local_;
  std::string lrInput_, stepInput_;
  std::vector<int> stateBuffers_; ///< shards and optimizer state: what a checkpoint holds
  std::string checkpointPath_, fingerprint_;

  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Worker> workers_;
  int64_t version_ = 0;
  /// Synchronous: the pending step's gradients per worker (in shards() order), and its lr.
  std::map<int, std::vector<std::vector<float>>> pending_;
  float pendingLr_ = 0;
  /// Asynchronous AGGREGATE: the sum of the pushes since the last update (in shards() order;
  /// empty when none), their count, and the lr of the latest.
  std::vector<std::vector<float>> aggSum_;
  int64_t aggregated_ = 0;
  Status failed_ = Status::ok(); ///< a failed update: every later call reports it
};

} // namespace dtc::rt::ps
