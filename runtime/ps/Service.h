// Parameter servers over gRPC (DESIGN.md sections 6 and 8, ps=S:W): a server task serves its
// ServerCore on exactly the address the cluster gives it; a worker task's client pulls and
// pushes with retries. gRPC rather than MPI, so that a worker can die and rejoin without
// ending the job. Every call carries the job token (metadata "x-dtc-job-token") and the plan's
// fingerprint, checked before anything else.
#pragma once

#include "compiler/plan/Plan.h"
#include "runtime/Executor.h"
#include "runtime/Trainer.h"
#include "runtime/ps/Cluster.h"

#include <memory>
#include <string>

namespace dtc::rt::ps {

struct ServiceOptions {
  /// The job secret every call must carry (--job-token-file; at least 16 bytes).
  std::string token;
  /// A worker silent for this long is lost: synchronous steps go on without it.
  double heartbeatTimeoutSeconds = 10;
  /// How long a worker retries an unreachable server (with backoff) before it fails, naming it.
  double timeoutSeconds = 60;
  /// TLS (gRPC SSL credentials) when all three are given: PEM files of this task's certificate
  /// and key, and of the CA that signed every task's certificate.
  std::string tlsCert, tlsKey, tlsCa;
  /// Servers: keep their state in this folder (ServerCore::enableCheckpoints) and restore it
  /// when restarted. "" for none.
  std::string checkpointDir;
  ExecutorOptions executor;
};

/// Runs parameter server `cluster.taskIndex` of `plan` until the chief worker is done and every
/// other worker is done or lost, or until SIGTERM/SIGINT. Errors: the address cannot be bound,
/// the plan's server count differs from the cluster's, loading the shards.
Status runServer(const plan::Plan &plan, const Cluster &cluster, const ServiceOptions &opts);

/// The client of worker `cluster.taskIndex`: one channel per server, a heartbeat thread.
Expected<std::unique_ptr<ParameterClient>>
createClient(const plan::Plan &plan, const Cluster &cluster, const ServiceOptions &opts);

} // namespace dtc::rt::ps
