// dtc-run --local-cluster (see LocalCluster.h).
#include "runtime/ps/LocalCluster.h"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

namespace dtc::rt::ps {
namespace {

volatile sig_atomic_t gSignal = 0;

/// A port the kernel hands out for 127.0.0.1 (closed again: the server binds it soon after;
/// the kernel does not hand it out again right away).
Expected<int> freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return Status::error("--local-cluster", std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Status::error("--local-cluster", "no free loopback port: " + why);
  }
  ::close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

Status writePrivate(const std::string &path, const std::string &text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return Status::error(path, std::string("cannot create: ") + std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok ? Status::ok() : Status::error(path, "write failed");
}

pid_t spawn(const std::string &self, const std::vector<std::string> &args) {
  std::vector<char *> argv;
  argv.push_back(const_cast<char *>(self.c_str()));
  for (const std::string &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // A task ends with its launcher (even one killed by SIGKILL).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(1);
    ::execv(self.c_str(), argv.data());
    std::fprintf(stderr, "error: --local-cluster: cannot run %s: %s\n", self.c_str(),
                 std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

int exitCode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status)
                           : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

} // namespace

Expected<int> runLocalCluster(const std::string &self, const std::vector<std::string> &args,
                              int servers, int workers) {
  char dirTemplate[] = "/tmp/dtc-cluster-XXXXXX";
  if (!::mkdtemp(dirTemplate))
    return Status::error("--local-cluster", std::string("mkdtemp: ") + std::strerror(errno));
  const std::string dir = dirTemplate;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  nlohmann::json cluster;
  cluster["cluster"]["worker"] = nlohmann::json::array();
  cluster["cluster"]["ps"] = nlohmann::json::array();
  for (int i = 0; i < workers + servers; ++i) {
    DTC_ASSIGN_OR_RETURN(int port, freePort());
    cluster["cluster"][i < workers ? "worker" : "ps"].push_back("127.0.0.1:" +
                                                                std::to_string(port));
  }
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 32; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned>(rd() & 0xff));
    token += hex;
  }
  const std::string clusterPath = dir + "/cluster.json", tokenPath = dir + "/job-token";
  DTC_RETURN_IF_ERROR(writePrivate(clusterPath, cluster.dump(2) + "\n"));
  DTC_RETURN_IF_ERROR(writePrivate(tokenPath, token + "\n"));
  auto withTask = [&](const std::string &task, bool chief) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--cluster", clusterPath, "--task", task, "--job-token-file", tokenPath});
    if (!chief)
      a.insert(a.end(), {"--quiet"});
    return a;
  };
  std::map<pid_t, std::string> serverPids, workerPids;
  // SIGTERM or SIGINT to the launcher ends every task (and the token's folder goes with it).
  struct sigaction sa {};
  sa.sa_handler = [](int sig) { gSignal = sig; };
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  bool endedByUs = false;
  for (int s = 0; s < servers; ++s)
    serverPids[spawn(self, withTask("ps:" + std::to_string(s), false))] = "ps:" + std::to_string(s);
  for (int w = 0; w < workers; ++w)
    workerPids[spawn(self, withTask("worker:" + std::to_string(w), w == 0))] =
        "worker:" + std::to_string(w);
  int chiefCode = 1;
  bool serverFailed = false;
  while (!workerPids.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR && gSignal) {
      std::fprintf(stderr, "error: --local-cluster: stopped by signal %d; ending every task\n",
                   static_cast<int>(gSignal));
      for (const auto &m : {&workerPids, &serverPids})
        for (const auto &[p, name] : *m)
          ::kill(p, SIGTERM);
      endedByUs = true;
      gSignal = 0;
      chiefCode = 128 + SIGTERM;
      continue;
    }
    if (pid < 0 && errno == EINTR)
      continue;
    if (pid < 0)
      break;
    if (auto it = workerPids.find(pid); it != workerPids.end()) {
      const int code = exitCode(status);
      if (it->second == "worker:0" && !endedByUs) {
        chiefCode = code;
        if (code != 0 && WIFSIGNALED(status))
          std::fprintf(stderr, "error: worker:0 (the chief) was killed by signal %d\n",
                       WTERMSIG(status));
      } else if (code != 0 && !endedByUs)
        std::fprintf(stderr, "warning: %s exited with code %d; training went on without it\n",
                     it->second.c_str(), code);
      workerPids.erase(it);
    } else if (auto st = serverPids.find(pid); st != serverPids.end()) {
      const bool failed = exitCode(status) != 0;
      if (failed)
        std::fprintf(stderr, "error: %s exited with code %d\n", st->second.c_str(),
                     exitCode(status));
      serverPids.erase(st);
      if (failed) {
        // The workers cannot train without the server's parameters: end the job.
        serverFailed = true;
        endedByUs = true;
        for (const auto &[w, name] : workerPids)
          ::kill(w, SIGTERM);
      }
    }
  }
  // The servers end on their own once the workers are done; SIGTERM ends them otherwise.
  for (const auto &[pid, name] : serverPids)
    ::kill(pid, SIGTERM);
  for (const auto &[pid, name] : serverPids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (exitCode(status) != 0 && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)) {
      std::fprintf(stderr, "error: %s exited with code %d\n", name.c_str(), exitCode(status));
      serverFailed = true;
    }
  }
  return chiefCode != 0 ? chiefCode : serverFailed ? 1 : 0;
}

} // namespace dtc::rt::ps
