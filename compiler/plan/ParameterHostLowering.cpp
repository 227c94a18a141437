// The programs of ps=S:W and cs=N (detail::lowerParameterHost, see LoweringInternal.h): the
// workers' graph lowers like a single device's without an optimizer part; each server's graph
// (driver::buildParameterHost) lowers to a program whose parameters are its shards, loaded from
// the model's rows [begin, begin + rows) (ShardSpec group "ps"), and whose gradients are inputs.
#include "compiler/plan/LoweringInternal.h"

namespace dtc::plan {

Expected<Plan> detail::lowerParameterHost(const ir::Graph &graph, const ir::ParameterHost &host,
                                          const TrainingConfig &cfg, const LowerOptions &opts) {
  DTC_ASSIGN_OR_RETURN(Plan plan, detail::lowerProgram(graph, opts, &cfg, /*finish=*/false));
  {
    Training &tr = *plan.mutable_programs(0)->mutable_training();
    if (tr.optimizer_begin() < 0)
      tr.set_optimizer_begin(plan.programs(0).instructions_size());
    if (tr.optimizer_begin() != plan.programs(0).instructions_size())
      return Status::error("lowering", "the workers' graph has an optimizer part");
  }
  DTC_RETURN_IF_ERROR(detail::finishPlan(plan, graph, opts, &cfg, /*numCollectives=*/0,
                                         [](const MeshCoord &) { return 0; }));
  ParameterHostInfo *info = plan.mutable_parameter_host();
  info->set_kind(cfg.mesh.psServers > 0 ? ParameterHostInfo::PARAMETER_SERVERS
                                        : ParameterHostInfo::CENTRAL_STORAGE);
  info->set_workers(static_cast<int32_t>(cfg.mesh.dp));
  info->set_staleness(cfg.mesh.psServers > 0 ? cfg.staleness : 0);
  info->set_async_rule(cfg.asyncRule == "aggregate"      ? ParameterHostInfo::AGGREGATE
                       : cfg.asyncRule == "staleness-lr" ? ParameterHostInfo::STALENESS_LR
                                                         : ParameterHostInfo::SCALED);
  for (const ir::ParameterShardInfo &sh : host.shards) {
    ParameterShard *ps = info->add_shards();
    ps->set_parameter(sh.parameter);
    ps->set_server(sh.server);
    ps->set_begin(sh.begin);
    ps->set_rows(sh.rows);
    ps->set_server_parameter(sh.serverParameter);
  }
  TrainingConfig serverCfg = cfg;
  serverCfg.mesh = Mesh{};
  for (size_t s = 0; s < host.servers.size(); ++s) {
    const std::string who = "server " + std::to_string(s);
    auto lowered = detail::lowerProgram(*host.servers[s], opts, &serverCfg, /*finish=*/false);
    if (!lowered)
      return Status::error(who, lowered.status().message());
    RankProgram rp = std::move(*lowered->mutable_programs(0));
    rp.clear_data_bindings(); // its inputs are the pushed gradients, not dataset arrays
    Training &tr = *rp.mutable_training();
    tr.set_forward_end(0);
    if (tr.optimizer_begin() != 0)
      return Status::error(who, "its program does not start with the optimizer");
    ServerInfo *si = info->add_servers();
    si->set_program(plan.programs_size());
    for (size_t k = 0; k < host.shards.size(); ++k) {
      const ir::ParameterShardInfo &sh = host.shards[k];
      if (sh.server != static_cast<int>(s))
        continue;
      si->add_shards(static_cast<int32_t>(k));
      if (sh.serverParameter >= tr.parameters_size())
        return Status::error(who, "shard of '" + sh.parameter + "' has no trained parameter");
      // The pushed gradient is an input of the server's program.
      Buffer &g = *rp.mutable_buffers(tr.parameters(sh.serverParameter).gradient());
      g.set_kind(BUFFER_INPUT);
      g.clear_source();
      Buffer &b = *rp.mutable_buffers(tr.parameters(sh.serverParameter).buffer());
      b.set_source(sh.parameter); // loaded from the model's initializer
      if (!sh.whole) {
        const ir::Value *whole = graph.findValue(sh.parameter);
        ShardSpec *spec = b.mutable_shard();
        spec->set_group("ps");
        spec->set_axis(0);
        spec->set_parts(1);
        spec->set_blocks(1);
        spec->set_begin(sh.begin);
        for (int64_t d : whole->initializer()->dims())
          spec->add_whole_shape(d);
      }
    }
    *plan.add_programs() = std::move(rp);
  }
  Status valid = validatePlan(plan, "");
  if (!valid.isOk())
    return Status::error(valid.message());
  return plan;
}

} // namespace dtc::plan
