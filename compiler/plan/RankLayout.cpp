// The plan-wide parts of a plan: the rank table and communicator groups from the device mesh
// (layoutRanks in Lowering.h: which program each rank runs, its mesh coordinates and the ids of
// its groups), and detail::finishPlan (LoweringInternal.h: mesh, hyperparameters, the model's
// checksums, validation) that every lowered plan ends with.
#include "compiler/plan/LoweringInternal.h"

#include <filesystem>
#include <map>
#include <set>

namespace dtc::plan {

Status layoutRanks(Plan &plan, const Mesh &mesh,
                   const std::function<int(const MeshCoord &)> &programOf) {
  MeshInfo *mi = plan.mutable_mesh();
  mi->set_strategy(mesh.text());
  mi->set_dp(mesh.dp);
  mi->set_pp(mesh.pp);
  mi->set_tp(mesh.tp);
  mi->set_microbatches(mesh.microbatches);
  mi->set_schedule(mesh.pp > 1 ? pipelineScheduleName(mesh.schedule) : "");
  mi->set_virtual_stages(mesh.pp > 1 ? mesh.virtualStages : 0);
  const int64_t world = mesh.worldSize();
  plan.set_world_size(static_cast<int32_t>(world));
  plan.clear_groups();
  plan.clear_ranks();
  for (RankProgram &p : *plan.mutable_programs())
    p.clear_ranks();
  // group id per (axis, rank)
  std::vector<std::vector<int32_t>> groupsOfRank(static_cast<size_t>(world));
  if (!mesh.single) {
    for (MeshAxis axis : {MeshAxis::kTp, MeshAxis::kDp, MeshAxis::kPp}) {
      if (mesh.degree(axis) == 1 && axis != MeshAxis::kDp)
        continue;
      for (const std::vector<int64_t> &g : mesh.groups(axis)) {
        CommGroup *cg = plan.add_groups();
        cg->set_id(plan.groups_size() - 1);
        cg->set_axis(meshAxisName(axis));
        for (int64_t r : g) {
          cg->add_ranks(static_cast<int32_t>(r));
          groupsOfRank[static_cast<size_t>(r)].push_back(cg->id());
        }
      }
    }
  }
  std::vector<bool> used(static_cast<size_t>(plan.programs_size()), false);
  for (int64_t r = 0; r < world; ++r) {
    const MeshCoord c = mesh.coordOf(r);
    const int p = programOf(c);
    if (p < 0 || p >= plan.programs_size())
      return Status::error("lowering", "rank " + std::to_string(r) + " has no program");
    used[static_cast<size_t>(p)] = true;
    RankInfo *ri = plan.add_ranks();
    ri->set_rank(static_cast<int32_t>(r));
    ri->mutable_device()->set_type(DEVICE_CPU);
    ri->set_program(p);
    ri->set_dp(c.dp);
    ri->set_pp(c.pp);
    ri->set_tp(c.tp);
    for (int32_t g : groupsOfRank[static_cast<size_t>(r)])
      ri->add_groups(g);
    plan.mutable_programs(p)->add_ranks(static_cast<int32_t>(r));
  }
  for (size_t p = 0; p < used.size(); ++p)
    if (!used[p])
      return Status::error("lowering", "program " + std::to_string(p) + " is run by no rank");
  return Status::ok();
}

Status mergeTensorParallelPlans(Plan &plan, const std::vector<const Plan *> &others) {
  const int64_t tp = plan.mesh().tp();
  if (static_cast<int64_t>(others.size()) + 1 != tp)
    return Status::error("lowering", "per-tp-rank plans: " + std::to_string(others.size() + 1) +
                                         " for tp=" + std::to_string(tp));
  // Program contents without their rank lists, to store identical ones once.
  auto contents = [](RankProgram p) {
    p.clear_ranks();
    return p.SerializeAsString();
  };
  std::map<std::string, int> known;
  for (int p = 0; p < plan.programs_size(); ++p)
    known.emplace(contents(plan.programs(p)), p);
  std::map<std::string, uint32_t> constantIds; // content -> shared_data id (1-based)
  for (int k = 0; k < plan.constants_size(); ++k)
    constantIds.emplace(plan.constants(k), static_cast<uint32_t>(k + 1));
  // o's program -> plan's, per source plan: a plan that serves several tp indices (a class
  // of equal range lengths) has its programs compared and added once.
  std::map<const Plan *, std::map<int, int>> programOfPlan;
  for (size_t t = 1; t <= others.size(); ++t) {
    if (!others[t - 1])
      continue; // tp index t runs tp index 0's programs, which the rank table already names
    const Plan &o = *others[t - 1];
    if (o.world_size() != plan.world_size() || o.ranks_size() != plan.ranks_size() ||
        o.mesh().tp() != tp)
      return Status::error("lowering", "the plan of tp index " + std::to_string(t) +
                                           " has another mesh than tp index 0's");
    std::map<int, int> &programOf = programOfPlan[&o];
    for (int r = 0; r < o.ranks_size(); ++r) {
      if (o.ranks(r).tp() != static_cast<int64_t>(t))
        continue;
      const int from = o.ranks(r).program();
      auto it = programOf.find(from);
      if (it == programOf.end()) {
        RankProgram p = o.programs(from);
        for (Buffer &b : *p.mutable_buffers()) {
          if (b.shared_data() == 0)
            continue;
          const std::string &bytes = o.constants(static_cast<int>(b.shared_data()) - 1);
          auto [c, added] =
              constantIds.emplace(bytes, static_cast<uint32_t>(plan.constants_size() + 1));
          if (added)
            plan.add_constants(bytes);
          b.set_shared_data(c->second);
        }
        const std::string key = contents(p);
        auto [k, added] = known.emplace(key, plan.programs_size());
        if (added) {
          p.clear_ranks();
          *plan.add_programs() = std::move(p);
        }
        it = programOf.emplace(from, k->second).first;
      }
      plan.mutable_ranks(r)->set_program(it->second);
    }
  }
  for (RankProgram &p : *plan.mutable_programs())
    p.clear_ranks();
  for (int r = 0; r < plan.ranks_size(); ++r)
    plan.mutable_programs(plan.ranks(r).program())->add_ranks(r);
  Status valid = validatePlan(plan, "");
  if (!valid.isOk())
    return Status::error(valid.message());
  return Status::ok();
}

std::vector<std::string> externalDataFiles(const ir::Graph &graph) {
  std::set<std::string> files;
  for (const ir::Value *v : graph.initializers())
    if (v->initializer() && v->initializer()->isExternal() && !v->isConstant())
      files.insert(v->initializer()->externalPath());
  return {files.begin(), files.end()};
}

Status detail::finishPlan(Plan &plan, const ir::Graph &graph, const LowerOptions &opts,
                  const TrainingConfig *cfg, int numCollectives,
                  const std::function<int(const MeshCoord &)> &programOf) {
  // Data parallelism: every rank runs the one program on its shard of the batch.
  const Mesh mesh = cfg ? cfg->mesh : Mesh{};
  if (mesh.single && numCollectives > 0)
    return Status::error("lowering", "the graph has collectives (ai.dtc.AllReduce) but the "
                                     "strategy is single");
  DTC_RETURN_IF_ERROR(layoutRanks(plan, mesh, programOf));
  if (opts.device == ops::DeviceKind::kCuda)
    for (RankInfo &ri : *plan.mutable_ranks())
      ri.mutable_device()->set_type(DEVICE_CUDA);
  if (!mesh.single) {
    plan.mutable_hyperparameters()->set_bucket_mb(cfg->bucketMb);
    plan.mutable_hyperparameters()->set_sync_batchnorm(cfg->syncBatchNorm);
  }
  ModelRef *model = plan.mutable_model();
  model->set_path(opts.modelPath);
  model->set_untie_initializers(opts.untieInitializers);
  if (!opts.modelFile.empty()) {
    auto checksumOf = [&](const std::string &path, const char *what, uint64_t maxBytes) {
      return opts.checksums ? opts.checksums->get(path, what, maxBytes)
                            : checksumFile(path, what, maxBytes);
    };
    DTC_ASSIGN_OR_RETURN(std::string checksum,
                         checksumOf(opts.modelFile, "the model", kMaxModelFileBytes));
    model->set_checksum(checksum);
    model->set_checksum_algorithm(kChecksumAlgorithm);
    std::error_code ec;
    model->set_size_bytes(std::filesystem::file_size(opts.modelFile, ec));
    // External data is part of the model: the runtime checks each file it reads weights from.
    const std::filesystem::path dir =
        std::filesystem::weakly_canonical(std::filesystem::absolute(opts.modelFile, ec), ec)
            .parent_path();
    for (const std::string &f : externalDataFiles(graph)) {
      ExternalFile *x = model->add_external_data();
      x->set_location(std::filesystem::path(f).lexically_relative(dir).string());
      DTC_ASSIGN_OR_RETURN(std::string fileChecksum,
                           checksumOf(f, "the model's external data", kMaxExternalDataBytes));
      x->set_checksum(fileChecksum);
      x->set_checksum_algorithm(kChecksumAlgorithm);
      x->set_size_bytes(std::filesystem::file_size(f, ec));
    }
  }
  // Large constants once per plan (every pipeline stage and every layer may fold the same).
  shareConstants(plan);
  // The plan must pass the runtime's own validation (for example the arena limit): never write
  // a plan that dtc-run would refuse.
  Status valid = validatePlan(plan, "");
  if (!valid.isOk())
    return Status::error(valid.message());
  return Status::ok();
}


} // namespace dtc::plan
