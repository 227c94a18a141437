// dtc-run --nproc N (Launcher.h): fork + exec of mpirun on this executable, forwarding SIGINT,
// SIGTERM and SIGHUP sent by kill(1) to it (mpirun also gets SIGTERM when the launcher dies),
// and returning its exit status.
#include "runtime/comm/Launcher.h"

#include "runtime/comm/Communicator.h"

#include <csignal>
#include <sys/prctl.h>
#include <cstring>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string_view>

namespace dtc::rt {
namespace {

/// The first executable `name` on PATH, empty when none.
std::string findOnPath(const std::string &name) {
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos)
      end = dirs.size();
    // An empty entry means the current directory.
    std::string dir(end > begin ? std::string_view(dirs).substr(begin, end - begin) : ".");
    std::string candidate = dir + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    begin = end + 1;
  }
  return {};
}

volatile sig_atomic_t gChild = 0;
/// The signal that stopped the job (SIGINT, SIGTERM, SIGHUP), 0 when none.
volatile sig_atomic_t gStopSignal = 0;

void forward(int sig, siginfo_t *info, void *) {
  // Signals from the terminal (SI_KERNEL) reach mpirun directly (same process group): forwarding
  // them too would make mpirun see each twice.
  gStopSignal = sig;
  if (gChild > 0 && info && info->si_code != SI_KERNEL)
    ::kill(gChild, sig == SIGHUP ? SIGTERM : sig); // mpirun ends the job on SIGTERM
}

} // namespace

std::vector<std::string> localLaunchCommand(const std::string &mpirun, const std::string &self,
                                            int nproc, const std::vector<std::string> &args) {
  std::vector<std::string> cmd = {mpirun,      "-n",  std::to_string(nproc), "--oversubscribe",
                                  "--bind-to", "none"};
  if (::geteuid() == 0)
    cmd.push_back("--allow-run-as-root");
  cmd.push_back("-x");
  cmd.push_back("OMP_NUM_THREADS");
  cmd.push_back(self);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i; // and its value
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0)
      continue;
    cmd.push_back(args[i]);
  }
  return cmd;
}

Expected<int> launchLocal(int nproc, const std::vector<std::string> &args) {
  if (nproc < 1)
    return Status::error("--nproc", std::to_string(nproc) + ": must be at least 1");
  std::string mpirun = findOnPath("mpirun");
  if (mpirun.empty())
    return Status::error("--nproc", "mpirun not found: install openmpi-bin");
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return Status::error("--nproc",
                         std::string("cannot read /proc/self/exe: ") + std::strerror(errno));
  self[n] = '\0';
  std::vector<std::string> cmd = localLaunchCommand(mpirun, self, nproc, args);

  if (!std::getenv("OMP_NUM_THREADS")) {
    unsigned cores = std::thread::hardware_concurrency();
    int threads = std::max(1, static_cast<int>(cores) / nproc);
    ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  }

  std::vector<char *> argv;
  for (std::string &s : cmd)
    argv.push_back(s.data());
  argv.push_back(nullptr);

  std::fflush(stdout);
  std::fflush(stderr);
  gStopSignal = 0;
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0)
    return Status::error("--nproc", std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // mpirun (and with it every rank) ends when this launcher dies, even by SIGKILL: no rank
    // may keep training after its job is gone.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(1); // the launcher died before prctl took effect
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "error: --nproc: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  gChild = pid;
  struct sigaction sa, oldInt, oldTerm, oldHup;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &oldInt);
  ::sigaction(SIGTERM, &sa, &oldTerm);
  ::sigaction(SIGHUP, &sa, &oldHup); // a closed terminal or ssh session ends the job too
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
  ::sigaction(SIGHUP, &oldHup, nullptr);
  gChild = 0;
  if (r < 0)
    return Status::error("--nproc",
                         std::string("waiting for mpirun failed: ") + std::strerror(errno));
  // Interrupted (Ctrl-C, kill): exit as a process killed by that signal would, 128 + signal,
  // whatever status mpirun chose while ending the ranks.
  if (gStopSignal != 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    return 128 + gStopSignal;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

namespace {
/// A positive integer from the environment, 0 when unset or malformed.
long envInt(const char *name, bool allowZero) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return -1;
  char *end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < (allowZero ? 0 : 1) || x > INT_MAX)
    return -1;
  return x;
}
} // namespace

int launcherWorldSize() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    long x = envInt(name, false);
    if (x > 0)
      return static_cast<int>(x);
  }
  // srun --mpi=pmix sets PMIX_RANK but no size variable: Slurm's step size.
  if (envInt("PMIX_RANK", true) >= 0)
    for (const char *name : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}) {
      long x = envInt(name, false);
      if (x > 0)
        return static_cast<int>(x);
    }
  return 1;
}

int launcherRank() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    long x = envInt(name, true);
    if (x >= 0)
      return static_cast<int>(x);
  }
  return 0;
}

} // namespace dtc::rt
