// The parameter host's graphs (see ParameterHost.h).
#include "compiler/driver/ParameterHost.h"

#include "passes/Passes.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace dtc::driver {

int64_t shardCount(int64_t bytes, int64_t rows, int64_t servers, int64_t minShardBytes) {
  const int64_t cap = std::max<int64_t>(1, std::min(servers, rows));
  return std::clamp<int64_t>(bytes / std::max<int64_t>(1, minShardBytes), 1, cap);
}

std::vector<int> placeShards(const std::vector<int64_t> &bytes, const std::vector<int> &parameter,
                             int servers) {
  std::vector<size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<int64_t> load(static_cast<size_t>(servers), 0);
  std::vector<int> out(bytes.size(), 0);
  std::map<int, std::set<int>> used; // parameter -> servers holding one of its shards
  for (size_t i : order) {
    std::set<int> &taken = used[parameter[i]];
    int best = -1;
    for (int s = 0; s < servers; ++s)
      if (!taken.count(s) &&
          (best < 0 || load[static_cast<size_t>(s)] < load[static_cast<size_t>(best)]))
        best = s;
    out[i] = best < 0 ? 0 : best;
    taken.insert(out[i]);
    load[static_cast<size_t>(out[i])] += bytes[i];
  }
  return out;
}

Expected<ir::ParameterHost> buildParameterHost(const ir::Graph &worker, const TrainingConfig &cfg,
                                               const passes::PassManagerOptions &pm) {
  const ir::TrainingRoles &st = worker.training();
  const int servers = cfg.mesh.psServers > 0 ? static_cast<int>(cfg.mesh.psServers) : 1;
  ir::ParameterHost host;
  // Shards in the order of the workers' parameters, each parameter's shards by row.
  std::vector<int64_t> bytes;
  std::vector<int> owner;
  std::vector<std::vector<int64_t>> wholeDims;
  std::vector<int64_t> part; // the shard's index among its parameter's
  for (size_t i = 0; i < st.parameters.size(); ++i) {
    const ir::Value *p = st.parameters[i];
    if (!st.gradients[i])
      continue; // frozen or unused: the workers keep it
    const std::vector<int64_t> dims = p->initializer()->dims();
    int64_t elems = 1;
    for (int64_t d : dims)
      elems *= d;
    const int64_t size = elems * ir::dtypeSize(p->type().dtype);
    const int64_t rows = dims.empty() ? 1 : dims[0];
    const int64_t k =
        cfg.mesh.psServers > 0 ? shardCount(size, rows, servers, cfg.psMinShardBytes) : 1;
    int64_t begin = 0;
    for (int64_t j = 0; j < k; ++j) {
      ir::ParameterShardInfo sh;
      sh.parameter = p->name();
      sh.whole = k == 1;
      sh.begin = begin;
      sh.rows = dims.empty() ? 1 : rows / k + (j < rows % k ? 1 : 0);
      begin += sh.rows;
      host.shards.push_back(sh);
      bytes.push_back(dims.empty() ? size : size / rows * sh.rows);
      owner.push_back(static_cast<int>(i));
      wholeDims.push_back(dims);
      part.push_back(j);
    }
  }
  const std::vector<int> placed = placeShards(bytes, owner, servers);
  std::vector<int> perServer(static_cast<size_t>(servers), 0);
  for (size_t k = 0; k < host.shards.size(); ++k) {
    host.shards[k].server = placed[k];
    host.shards[k].serverParameter = perServer[static_cast<size_t>(placed[k])]++;
  }
  for (int s = 0; s < servers; ++s)
    if (perServer[static_cast<size_t>(s)] == 0)
      return Status::error("--strategy " + cfg.mesh.text(),
                           "server " + std::to_string(s) + " gets no parameter: the model's " +
                               std::to_string(host.shards.size()) +
                               " parameter shards do not fill " + std::to_string(servers) +
                               " servers (use fewer servers, or a smaller --ps-min-shard-bytes)");

  // One graph per server: its shards as trained parameters (zeros: the runtime loads them from
  // the model), the pushed gradients as inputs, then the optimizer pass.
  TrainingConfig serverCfg = cfg;
  serverCfg.mesh = Mesh{};
  for (int s = 0; s < servers; ++s) {
    auto g = std::make_unique<ir::Graph>();
    g->setName(worker.name() + "/ps" + std::to_string(s));
    g->modelInfo() = worker.modelInfo();
    for (const auto &[domain, version] : worker.opsets())
      g->setOpset(domain, version);
    ir::TrainingRoles &roles = g->training();
    for (size_t k = 0; k < host.shards.size(); ++k) {
      const ir::ParameterShardInfo &sh = host.shards[k];
      if (sh.server != s)
        continue;
      const ir::Value *p = worker.findValue(sh.parameter);
      std::vector<int64_t> dims = wholeDims[k];
      if (!dims.empty())
        dims[0] = sh.rows;
      const std::string name =
          sh.whole ? sh.parameter : sh.parameter + "/ps_shard" + std::to_string(part[k]);
      const ir::TensorType type{p->type().dtype, ir::Shape::ofStatic(dims)};
      ir::Value *v = g->createValue(name, type);
      g->setInitializer(v, ir::TensorData::zeros(name, type.dtype, dims), /*isConstant=*/false);
      ir::Value *grad = g->createValue(name + "/grad", type);
      g->addInput(grad);
      roles.parameters.push_back(v);
      roles.gradients.push_back(grad);
    }
    passes::PassContext ctx;
    ctx.training = &serverCfg;
    passes::PassManager manager(pm);
    manager.add(passes::createPassByName("optimizer"));
    Status ran = manager.run(*g, ctx);
    if (!ran.isOk())
      return Status::error("server " + std::to_string(s), ran.message());
    host.servers.push_back(std::move(g));
  }
  return host;
}

} // namespace dtc::driver
