// `dtc-run --nproc N`: a local multi-rank run without typing mpirun. dtc-run re-executes itself
// under Open MPI's mpirun as N ranks on this machine and returns mpirun's exit status.
//
// Several hosts: call mpirun yourself with a hostfile (one line per host, "node1 slots=2"):
//   mpirun -n 4 --hostfile hosts --bind-to none -x OMP_NUM_THREADS=8 dtc-run plan.dtc --data d.npz
// (the plan, data and dtc-run must be at the same paths on every host; Slurm: `srun -n 4 dtc-run
// ...` with Open MPI's PMIx support). Each process finds its rank from the launcher's
// environment (launcherWorldSize/launcherRank in Communicator.h).
#pragma once

#include "compiler/support/Status.h"

#include <string>
#include <vector>

namespace dtc::rt {

/// Runs `mpirun -n N --oversubscribe --bind-to none [--allow-run-as-root when root]
/// -x OMP_NUM_THREADS <this executable> <args>` and waits for it: `args` are this program's
/// arguments after argv[0]; "--nproc N" and "--nproc=N" are removed from them (the ranks must not
/// launch again). OMP_NUM_THREADS is max(1, cores / N) unless already set. SIGINT and SIGTERM
/// sent to this process (kill, not the terminal, which signals mpirun itself) are forwarded to
/// mpirun. Returns mpirun's exit status (128 + signal number when it was killed by a signal).
/// Errors: nproc < 1, "mpirun not found: install openmpi-bin", the executable's path cannot be
/// read, fork/exec failures.
Expected<int> launchLocal(int nproc, const std::vector<std::string> &args);

/// The command line launchLocal runs (for messages and tests); `mpirun` is its resolved path.
std::vector<std::string> localLaunchCommand(const std::string &mpirun, const std::string &self,
                                            int nproc, const std::vector<std::string> &args);

} // namespace dtc::rt
