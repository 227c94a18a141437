// The cluster of a parameter-server job, in TensorFlow's TF_CONFIG format (DESIGN.md section 8):
//   {"cluster": {"chief": ["host:port"], "worker": ["host:port", ...], "ps": ["host:port", ...]},
//    "task": {"type": "worker", "index": 1}}
// from the TF_CONFIG environment variable, or from --cluster FILE (the same JSON, "task"
// optional) with --task TYPE:INDEX. A "chief" entry is worker 0 and the "worker" entries
// follow it, as Kubeflow's TFJob lays them out; without one, worker 0 is the chief.
#pragma once

#include "compiler/support/Status.h"

#include <string>
#include <vector>

namespace dtc::rt::ps {

struct Cluster {
  std::vector<std::string> workers; ///< "host:port", worker 0 the chief
  std::vector<std::string> servers; ///< "host:port" of ps 0, 1, ...
  /// This process's task: "worker" or "ps", and its index among them.
  std::string taskType;
  int taskIndex = -1;
};

/// Parses TF_CONFIG text. `where` names the source in errors ("TF_CONFIG", the file). Errors:
/// malformed JSON, a missing or empty "ps" or "worker"/"chief" list, an address that is not
/// host:port with a port in [1, 65535], more than one chief, an unknown task type, an index out
/// of range.
Expected<Cluster> parseClusterJson(const std::string &text, const std::string &where);

/// "worker:1" or "ps:0" (also "chief:0", worker 0) into `c`'s task. Errors name --task.
Status parseTask(const std::string &task, Cluster &c);

/// The job's secret from --job-token-file `path` (a regular file of at most 4 KiB; a final
/// newline dropped). Errors name the file: unreadable, not printable ASCII without spaces (it
/// travels as a gRPC header value), shorter than 16 bytes.
Expected<std::string> readJobToken(const std::string &path);

} // namespace dtc::rt::ps
