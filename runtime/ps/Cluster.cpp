// TF_CONFIG parsing (see Cluster.h).
#include "runtime/ps/Cluster.h"

#include "compiler/support/FileIO.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <set>

namespace dtc::rt::ps {
namespace {

Status checkAddress(const std::string &a, const std::string &where) {
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= a.size())
    return Status::error(where, "address '" + a + "' is not host:port");
  char *end = nullptr;
  const long port = std::strtol(a.c_str() + colon + 1, &end, 10);
  if (!end || *end || port < 1 || port > 65535)
    return Status::error(where, "address '" + a + "' has no port in [1, 65535]");
  return Status::ok();
}

Status setTask(Cluster &c, const std::string &type, long long index, const std::string &where) {
  if (type == "chief") {
    if (index != 0)
      return Status::error(where, "the chief's index is 0, got " + std::to_string(index));
    c.taskType = "worker";
    c.taskIndex = 0;
    return Status::ok();
  }
  if (type != "worker" && type != "ps")
    return Status::error(where, "task type '" + type + "' is not worker, chief or ps");
  const size_t count = type == "ps" ? c.servers.size() : c.workers.size();
  if (index < 0 || static_cast<size_t>(index) >= count)
    return Status::error(where, type + " index " + std::to_string(index) + " is not in [0, " +
                                    std::to_string(count) + ")");
  c.taskType = type;
  c.taskIndex = static_cast<int>(index);
  return Status::ok();
}

} // namespace

Expected<Cluster> parseClusterJson(const std::string &text, const std::string &where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    return Status::error(where, std::string("is not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("cluster") || !j["cluster"].is_object())
    return Status::error(where, "has no \"cluster\" object");
  Cluster c;
  auto list = [&](const char *key, std::vector<std::string> &out) -> Status {
    const nlohmann::json &cl = j["cluster"];
    if (!cl.contains(key))
      return Status::ok();
    if (!cl[key].is_array())
      return Status::error(where, std::string("cluster.") + key + " is not a list");
    for (const nlohmann::json &a : cl[key]) {
      if (!a.is_string())
        return Status::error(where, std::string("cluster.") + key + " holds a non-string");
      DTC_RETURN_IF_ERROR(checkAddress(a.get<std::string>(), where));
      out.push_back(a.get<std::string>());
    }
    return Status::ok();
  };
  std::vector<std::string> chief, workers;
  DTC_RETURN_IF_ERROR(list("chief", chief));
  DTC_RETURN_IF_ERROR(list("worker", workers));
  DTC_RETURN_IF_ERROR(list("ps", c.servers));
  if (chief.size() > 1)
    return Status::error(where, "has " + std::to_string(chief.size()) + " chiefs; at most one");
  c.workers = chief;
  c.workers.insert(c.workers.end(), workers.begin(), workers.end());
  if (c.workers.empty())
    return Status::error(where, "lists no worker (cluster.worker or cluster.chief)");
  if (c.servers.empty())
    return Status::error(where, "lists no parameter server (cluster.ps)");
  std::set<std::string> seen;
  for (const auto *list : {&c.workers, &c.servers})
    for (const std::string &a : *list)
      if (!seen.insert(a).second)
        return Status::error(where, "lists the address " + a + " twice (every task needs its own)");
  if (j.contains("task")) {
    const nlohmann::json &t = j["task"];
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string() || !t.contains("index") ||
        !t["index"].is_number_integer())
      return Status::error(where, "task must be {\"type\": \"worker\"|\"ps\", \"index\": N}");
    std::string type = t["type"].get<std::string>();
    long long index = t["index"].get<long long>();
    // With a chief, "worker" index i is worker i + 1.
    if (type == "worker" && !chief.empty())
      ++index;
    DTC_RETURN_IF_ERROR(setTask(c, type, index, where + ": task"));
  }
  return c;
}

Expected<std::string> readJobToken(const std::string &path) {
  DTC_ASSIGN_OR_RETURN(std::string token, readInputFile(path, "--job-token-file", 4096));
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r'))
    token.pop_back();
  for (unsigned char ch : token)
    if (ch < 0x21 || ch > 0x7e)
      return Status::error(path, "--job-token-file: the token must be printable ASCII without "
                                 "spaces (it travels as a gRPC header); make one with "
                                 "`openssl rand -hex 32`");
  if (token.size() < 16)
    return Status::error(path, "--job-token-file: the token has " + std::to_string(token.size()) +
                                   " bytes; at least 16 are needed");
  return token;
}

Status parseTask(const std::string &task, Cluster &c) {
  const std::string where = "--task " + task;
  const size_t colon = task.find(':');
  if (colon == std::string::npos)
    return Status::error(where, "expected TYPE:INDEX, e.g. worker:1 or ps:0");
  char *end = nullptr;
  const long long index = std::strtoll(task.c_str() + colon + 1, &end, 10);
  if (colon + 1 >= task.size() || !end || *end)
    return Status::error(where, "expected TYPE:INDEX, e.g. worker:1 or ps:0");
  return setTask(c, task.substr(0, colon), index, where);
}

} // namespace dtc::rt::ps
