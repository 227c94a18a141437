// dtc-run --local-cluster: the whole parameter-server job on this machine, for trying it out
// and for tests. Picks free loopback ports, writes the cluster (TF_CONFIG format) and a fresh
// job token (mode 0600) into a private temporary folder, starts the S servers and W workers as
// separate dtc-run processes (each with --cluster, --task and --job-token-file), and waits.
#pragma once

#include "compiler/support/Status.h"

#include <string>
#include <vector>

namespace dtc::rt::ps {

/// Runs `servers` servers and `workers` workers of `self` (this executable) with `args` (the
/// command line without --local-cluster). Worker 0 (the chief) prints progress; the others and
/// the servers run with --quiet. Returns the exit code: the chief's, or 1 when a
/// server failed; a non-chief worker that fails is reported and training goes on without it.
Expected<int> runLocalCluster(const std::string &self, const std::vector<std::string> &args,
                              int servers, int workers);

} // namespace dtc::rt::ps
