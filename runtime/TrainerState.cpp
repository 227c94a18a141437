// Checkpoints, --resume and the exchange of state between ranks (see TrainerInternal.h):
// sharded checkpoints (runtime/Checkpoint.h: one shard per program, written by its lowest rank,
// and a manifest written by rank 0 once every shard is on disk), the start-up agreement of the
// ranks, and the gathers behind --save-params, --export and --dump-gradients.
#include "compiler/ir/Sharding.h"
#include "runtime/TrainerInternal.h"

#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

namespace dtc::rt::detail {

namespace {

/// What each rank tells rank 0 after writing its shard (writeCheckpointAt): fixed size, so that
/// one all-gather collects them.
struct ShardRecord {
  int64_t written = 0; ///< 1 when this rank wrote a shard
  int64_t program = -1;
  uint64_t bytes = 0;
  double seconds = 0; ///< reading the buffers, writing and syncing the shard
  char sha256[64] = {};
};

std::string listOf(const std::set<int> &s) {
  std::string out;
  for (int v : s)
    out += (out.empty() ? "" : ", ") + std::to_string(v);
  return "{" + out + "}";
}

} // namespace

Status Trainer::sumOverRanks(std::vector<double> &values, const std::string &what) {
  if (!comm_ || world_ == 1 || values.empty())
    return Status::ok();
  return comm_->allReduceSum(values.data(), values.size(), what);
}

Status Trainer::checkSameRun() {
  struct Field {
    const char *what;
    int64_t value;
  };
  const std::vector<Field> mine = {
      {"training samples", train_.samples()},
      {"training data fingerprint", static_cast<int64_t>(train_.fingerprint())},
      {"validation samples (-1: no --val-data)", val_ ? val_->samples() : -1},
      {"validation data fingerprint", val_ ? static_cast<int64_t>(val_->fingerprint()) : 0},
      {"--seed", static_cast<int64_t>(seed_)},
      {"shuffling (1: --shuffle, 0: --no-shuffle)", shuffle_ ? 1 : 0},
      {"steps in the run (--steps, --epochs)", totalSteps_},
      {"--resume", opts_.resume ? 1 : 0},
      {"checkpointing (1: --checkpoint-dir)", opts_.checkpointDir.empty() ? 0 : 1},
      {"--checkpoint-every", opts_.checkpointEvery}};
  std::vector<int64_t> send;
  for (const Field &f : mine)
    send.push_back(f.value);
  std::vector<int64_t> all(send.size() * static_cast<size_t>(world_));
  DTC_RETURN_IF_ERROR(comm_->allGather(send.data(), send.size() * sizeof(int64_t), all.data(),
                                       "start-up check of the run"));
  for (int r = 1; r < world_; ++r)
    for (size_t f = 0; f < mine.size(); ++f) {
      const int64_t theirs = all[static_cast<size_t>(r) * send.size() + f];
      if (theirs != all[f])
        return Status::error(
            "rank " + std::to_string(rank_),
            "rank " + std::to_string(r) + " runs with " + mine[f].what + " " +
                std::to_string(theirs) + ", rank 0 with " + std::to_string(all[f]) +
                ": every rank of a job must read the same dataset with the same "
                "options (same --data/--val-data contents, --seed, --shuffle, --steps/--epochs, "
                "--resume, --checkpoint-dir, --checkpoint-every)");
    }
  return Status::ok();
}

Status Trainer::broadcastState() {
  if (!comm_ || world_ == 1)
    return Status::ok();
  for (int b : l_.persistent) {
    DTC_ASSIGN_OR_RETURN(HostArray a, ex_.readBuffer(b));
    DTC_RETURN_IF_ERROR(
        comm_->broadcast(a.bytes.data(), a.bytes.size(), 0, "broadcast of '" + a.name + "'"));
    if (rank_ != 0)
      DTC_RETURN_IF_ERROR(ex_.writeBuffer(b, a));
  }
  return Status::ok();
}

std::vector<std::pair<int, std::string>> Trainer::partOf(const TrainingLayout &l, Part part) {
  if (part == Part::kInitializers)
    return l.initializers;
  return l.gradients;
}

/// Tag of the transfers of gather() on the world communicator (the
/// pipeline's own transfers run on the pp groups' communicators).
constexpr int kStateTag = 1;

Status Trainer::gather(Part part, std::vector<HostArray> &out) {
  out.clear();
  const bool tp = plan_.mesh().tp() > 1;
  if (!pipeline_ && !tp) { // every rank holds everything
    if (rank_ == 0)
      for (const auto &[b, name] : partOf(l_, part)) {
        DTC_ASSIGN_OR_RETURN(HostArray a, ex_.readBuffer(b));
        a.name = name;
        out.push_back(std::move(a));
      }
    return Status::ok();
  }
  // One sender per (program, tensor-parallel index): the first rank holding that part of the
  // model. Rank 0 assembles whole tensors from the shards (ir::placeShard).
  std::vector<int> senders;
  std::set<std::pair<int, int64_t>> seen;
  for (int r = 0; r < plan_.ranks_size(); ++r)
    if (seen.insert({plan_.ranks(r).program(), plan_.ranks(r).tp()}).second)
      senders.push_back(r);
  const bool sender = std::find(senders.begin(), senders.end(), rank_) != senders.end();
  if (rank_ != 0) {
    if (sender)
      for (const auto &[b, name] : partOf(l_, part)) {
        DTC_ASSIGN_OR_RETURN(HostArray a, ex_.readBuffer(b));
        DTC_RETURN_IF_ERROR(
            comm_->send(a.bytes.data(), a.bytes.size(), 0, kStateTag, "'" + name + "' to rank 0"));
      }
    return Status::ok();
  }
  std::map<std::string, size_t> index; // name -> position in `out`
  for (int from : senders) {
    const plan::RankProgram &rp = plan_.programs(plan_.ranks(from).program());
    for (const auto &[b, name] : partOf(layoutOf(plan_, from), part)) {
      const plan::Buffer &buf = rp.buffers(b);
      HostArray a;
      if (from == 0) {
        DTC_ASSIGN_OR_RETURN(a, ex_.readBuffer(b));
      } else {
        a.dtype = static_cast<ir::DType>(buf.dtype());
        a.shape.assign(buf.shape().begin(), buf.shape().end());
        a.bytes.resize(buf.size_bytes());
        DTC_RETURN_IF_ERROR(comm_->recv(a.bytes.data(), a.bytes.size(), from, kStateTag,
                                        "'" + name + "' from rank " + std::to_string(from)));
      }
      a.name = name;
      auto it = index.find(name);
      if (!buf.has_shard()) {
        if (it == index.end()) { // replicated: the first copy (tensor-parallel peers agree)
          index[name] = out.size();
          out.push_back(std::move(a));
        }
        continue;
      }
      const plan::ShardSpec &sp = buf.shard();
      const std::vector<int64_t> whole(sp.whole_shape().begin(), sp.whole_shape().end());
      if (it == index.end()) {
        HostArray w;
        w.name = name;
        w.dtype = a.dtype;
        w.shape = whole;
        // The whole tensor's bytes (shards of an uneven split differ in size).
        size_t elements = 1;
        for (int64_t d : whole)
          elements *= static_cast<size_t>(d);
        w.bytes.assign(elements * ir::dtypeSize(a.dtype), '\0');
        it = index.emplace(name, out.size()).first;
        out.push_back(std::move(w));
      }
      ir::placeShard(out[it->second].bytes, whole, ir::dtypeSize(a.dtype),
                     ir::Sharding::split(sp.axis(), sp.parts(), sp.blocks()),
                     plan_.ranks(from).tp(), a.bytes);
    }
  }
  return Status::ok();
}

int Trainer::shardKey(int rank) const {
  const int tp = std::max<int>(1, static_cast<int>(plan_.mesh().tp()));
  return plan_.ranks(rank).program() * tp + static_cast<int>(plan_.ranks(rank).tp());
}

std::string Trainer::shardKeyName(int key) const {
  const int tp = std::max<int>(1, static_cast<int>(plan_.mesh().tp()));
  return tp == 1 ? "program " + std::to_string(key)
                 : "program " + std::to_string(key / tp) + ", tp rank " + std::to_string(key % tp);
}

std::vector<int> Trainer::zeroShardedState() const {
  std::vector<int> out;
  if (plan_.hyperparameters().zero() <= 0 || plan_.mesh().dp() <= 1 || !comm_)
    return out;
  for (int b : l_.persistent)
    if (program_.buffers(b).kind() == plan::BUFFER_OPTIMIZER_STATE)
      out.push_back(b);
  return out;
}

std::string Trainer::zeroShardName(const std::string &buffer, int64_t dp) {
  return buffer + "@dp" + std::to_string(dp);
}

int Trainer::shardWriter(int key) const {
  for (int r = 0; r < plan_.ranks_size(); ++r)
    if (shardKey(r) == key)
      return r;
  return -1;
}

Status Trainer::agree(const Status &local, const std::string &what) {
  if (!comm_ || world_ == 1)
    return local;
  // Lengths first (-1: ok), then the messages padded to the longest.
  constexpr size_t kMaxMessage = 4000;
  const std::string mine = local.isOk() ? std::string() : local.message().substr(0, kMaxMessage);
  const int64_t length = local.isOk() ? -1 : static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(static_cast<size_t>(world_));
  DTC_RETURN_IF_ERROR(comm_->allGather(&length, sizeof length, lengths.data(),
                                       what + " (the outcome on every rank)"));
  std::vector<int> failed;
  int64_t longest = 0;
  for (int r = 0; r < world_; ++r)
    if (lengths[static_cast<size_t>(r)] >= 0) {
      failed.push_back(r);
      longest = std::max(longest, lengths[static_cast<size_t>(r)]);
    }
  if (failed.empty())
    return Status::ok();
  const size_t width = static_cast<size_t>(std::max<int64_t>(longest, 1));
  std::string padded(width, '\0');
  std::memcpy(padded.data(), mine.data(), mine.size());
  std::string all(width * static_cast<size_t>(world_), '\0');
  DTC_RETURN_IF_ERROR(
      comm_->allGather(padded.data(), width, all.data(), what + " (the error messages)"));
  const int first = failed[0];
  std::string msg = all.substr(static_cast<size_t>(first) * width,
                               static_cast<size_t>(lengths[static_cast<size_t>(first)]));
  if (msg.rfind("rank ", 0) != 0)
    msg = "rank " + std::to_string(first) + ": " + msg;
  if (failed.size() > 1) {
    std::string others;
    for (size_t i = 1; i < failed.size(); ++i)
      others += (i > 1 ? ", " : "") + std::to_string(failed[i]);
    msg += " (rank" + std::string(failed.size() > 2 ? "s " : " ") + others + " failed too)";
  }
  return Status::error(msg);
}

Status Trainer::writeCheckpointAt(int64_t step, int64_t epoch, int64_t stepInEpoch,
                                  const Totals &t) {
  const auto t0 = Clock::now();
  CheckpointMeta meta;
  meta.step = step;
  meta.epoch = epoch;
  meta.stepInEpoch = stepInEpoch;
  meta.seed = seed_;
  meta.shuffle = shuffle_;
  meta.samples = train_.samples();
  meta.planFingerprint = fingerprint_;
  meta.epochLossSum = t.lossSum;
  meta.epochSteps = t.steps;
  meta.epochCorrect = t.correct;
  meta.epochCounted = t.counted;
  const std::string what = "checkpoint of step " + std::to_string(step);
  // 1. The lowest rank of every shard key (a program; with tensor parallelism a program and a
  // tp rank, whose peers hold different slices) writes that key's shard.
  const int program = shardKey(rank_);
  ShardRecord mine;
  Status wrote = Status::ok();
  // ZeRO: every data-parallel replica of a program holds its own optimizer-state shard; the
  // program's writer receives them all and stores "<buffer>@dp<d>" for each replica's dp index d.
  const std::vector<int> sharded = zeroShardedState();
  if (!sharded.empty() && shardWriter(program) != rank_) {
    Status sent = Status::ok();
    for (int b : sharded) {
      Expected<HostArray> a = ex_.readBuffer(b);
      if (!a) {
        sent = a.status();
        break;
      }
      sent = comm_->send(a->bytes.data(), a->bytes.size(), shardWriter(program), kStateTag,
                         "optimizer-state shard '" + program_.buffers(b).name() + "' to rank " +
                             std::to_string(shardWriter(program)) + " for the " + what);
      if (!sent.isOk())
        break;
    }
    wrote = sent;
  }
  if (shardWriter(program) == rank_) {
    wrote = [&]() -> Status {
      std::vector<HostArray> arrays;
      arrays.reserve(l_.persistent.size());
      for (int b : l_.persistent) {
        DTC_ASSIGN_OR_RETURN(HostArray a, ex_.readBuffer(b));
        if (std::find(sharded.begin(), sharded.end(), b) != sharded.end())
          a.name = zeroShardName(a.name, 0);
        arrays.push_back(std::move(a));
      }
      for (int r = 0; r < world_ && !sharded.empty(); ++r)
        for (int b : sharded) {
          if (r == rank_ || shardKey(r) != program)
            continue;
          const plan::Buffer &buf = program_.buffers(b);
          HostArray a;
          a.name = zeroShardName(buf.name(), plan_.ranks(r).dp());
          a.dtype = static_cast<ir::DType>(buf.dtype());
          a.shape.assign(buf.shape().begin(), buf.shape().end());
          a.bytes.resize(buf.size_bytes());
          DTC_RETURN_IF_ERROR(comm_->recv(a.bytes.data(), a.bytes.size(), r, kStateTag,
                                          "optimizer-state shard '" + buf.name() + "' from rank " +
                                              std::to_string(r) + " for the " + what));
          arrays.push_back(std::move(a));
        }
      DTC_ASSIGN_OR_RETURN(ShardRef ref,
                           writeShard(opts_.checkpointDir, meta, program, std::move(arrays)));
      mine.written = 1;
      mine.program = program;
      mine.bytes = ref.bytes;
      std::memcpy(mine.sha256, ref.sha256.data(), std::min(ref.sha256.size(), sizeof mine.sha256));
      mine.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      return Status::ok();
    }();
  }
  DTC_RETURN_IF_ERROR(agree(wrote, what));
  // 2. Rank 0 collects the shards' checksums and, all of them being on disk, commits the step
  // by writing its manifest.
  std::vector<ShardRecord> all(static_cast<size_t>(world_));
  if (comm_ && world_ > 1)
    DTC_RETURN_IF_ERROR(
        comm_->allGather(&mine, sizeof mine, all.data(), what + " (the shards' checksums)"));
  else
    all[0] = mine;
  std::stable_sort(all.begin(), all.end(), [](const ShardRecord &a, const ShardRecord &b) {
    return a.program < b.program;
  });
  Status committed = Status::ok();
  if (rank_ == 0) {
    Manifest mf;
    mf.meta = meta;
    nlohmann::json bytes = nlohmann::json::array(), seconds = nlohmann::json::array();
    for (const ShardRecord &r : all)
      if (r.written) {
        ShardRef ref;
        ref.program = static_cast<int>(r.program);
        ref.file = shardFileName(step, ref.program);
        ref.sha256.assign(r.sha256, sizeof r.sha256);
        ref.bytes = r.bytes;
        mf.shards.push_back(std::move(ref));
        bytes.push_back(r.bytes);
        seconds.push_back(r.seconds);
      }
    committed = writeManifest(opts_.checkpointDir, mf);
    if (committed.isOk())
      committed = logLine({{"event", "checkpoint"},
                           {"step", step},
                           {"manifest", manifestFileName(step)},
                           {"shard_bytes", bytes},
                           {"shard_seconds", seconds},
                           {"seconds", std::chrono::duration<double>(Clock::now() - t0).count()}});
  }
  return agree(committed, what);
}

Expected<Manifest> Trainer::pickCheckpoint() {
  DTC_ASSIGN_OR_RETURN(std::string path, newestCheckpoint(opts_.checkpointDir));
  DTC_ASSIGN_OR_RETURN(Manifest mf, readManifest(path, fingerprint_));
  const CheckpointMeta &m = mf.meta;
  if (opts_.seed && *opts_.seed != m.seed)
    return Status::error(path, "the checkpoint was made with --seed " + std::to_string(m.seed) +
                                   ", not " + std::to_string(*opts_.seed) +
                                   " (a resumed run keeps its seed)");
  if (opts_.shuffle && *opts_.shuffle != m.shuffle)
    return Status::error(path, std::string("the checkpoint was made with ") +
                                   (m.shuffle ? "--shuffle" : "--no-shuffle") +
                                   " (a resumed run keeps its data order)");
  if (m.samples != train_.samples())
    return Status::error(path, "the checkpoint's run read " + std::to_string(m.samples) +
                                   " training samples, " + train_.path() + " has " +
                                   std::to_string(train_.samples()));
  if (m.step < 0 || m.stepInEpoch < 0 || m.epoch * stepsPerEpoch_ + m.stepInEpoch != m.step ||
      m.stepInEpoch >= stepsPerEpoch_)
    return Status::error(path, "inconsistent position (step " + std::to_string(m.step) +
                                   ", epoch " + std::to_string(m.epoch) + ", step in epoch " +
                                   std::to_string(m.stepInEpoch) + ")");
  // One shard for every shard key of the plan's ranks (program, and tp rank), and no other.
  std::set<int> want, have;
  for (int r = 0; r < plan_.ranks_size(); ++r)
    want.insert(shardKey(r));
  for (const ShardRef &s : mf.shards)
    have.insert(s.program);
  if (want != have)
    return Status::error(path, "names shards " + listOf(have) + ", the plan's ranks need shards " +
                                   listOf(want) + " (one per program" +
                                   (plan_.mesh().tp() > 1 ? " and tp rank)" : ")"));
  return mf;
}

Status Trainer::restoreShard(const Manifest &manifest) {
  const int program = shardKey(rank_);
  DTC_ASSIGN_OR_RETURN(std::vector<HostArray> arrays, readShard(manifest, program));
  const std::string path =
      (std::filesystem::path(manifest.path).parent_path() / manifest.shardOf(program)->file)
          .string();
  std::map<std::string, const HostArray *> byName;
  for (const HostArray &a : arrays)
    byName[a.name] = &a;
  const std::string of =
      shardKeyName(program) + " (rank " + std::to_string(rank_) + ")";
  // ZeRO: the shard holds every data-parallel rank's optimizer-state shard; this rank takes its
  // own ("<buffer>@dp<r>").
  const std::vector<int> sharded = zeroShardedState();
  const int64_t replicas = sharded.empty() ? 1 : plan_.mesh().dp();
  const size_t expected = l_.persistent.size() + sharded.size() * static_cast<size_t>(replicas - 1);
  if (byName.size() != expected)
    return Status::error(
        path,
        "holds " + std::to_string(byName.size()) + " arrays, " + of + " has " +
            std::to_string(expected) + " buffers to restore (parameters, optimizer state" +
            (sharded.empty() ? std::string() : " of " + std::to_string(replicas) + " ZeRO shards") +
            ", running statistics)");
  for (int b : l_.persistent) {
    std::string name = program_.buffers(b).name();
    if (std::find(sharded.begin(), sharded.end(), b) != sharded.end())
      name = zeroShardName(name, plan_.ranks(rank_).dp());
    auto it = byName.find(name);
    if (it == byName.end())
      return Status::error(path, "has no array '" + name + "', a buffer of " + of);
    Status s = ex_.writeBuffer(b, *it->second);
    if (!s.isOk())
      return s.withContext(path);
  }
  return Status::ok();
}

Status Trainer::start(int64_t &step, Totals &epochTotals) {
  // Rank 0 alone looks at the folder and opens the log; every rank learns the outcome.
  Manifest manifest;
  Status checked = Status::ok();
  if (rank_ == 0) {
    checked = [&]() -> Status {
      if (opts_.resume) {
        DTC_ASSIGN_OR_RETURN(manifest, pickCheckpoint());
      } else if (!opts_.checkpointDir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(opts_.checkpointDir, ec);
        if (!std::filesystem::is_directory(opts_.checkpointDir, ec))
          return Status::error(opts_.checkpointDir, "cannot create the checkpoint folder");
        if (newestCheckpoint(opts_.checkpointDir))
          return Status::error(opts_.checkpointDir,
                               "holds checkpoints of an earlier run: pass --resume to continue "
                               "it, or use another folder");
      }
      if (!opts_.logPath.empty())
        DTC_RETURN_IF_ERROR(log_.open(opts_.logPath, opts_.resume));
      return Status::ok();
    }();
  }
  DTC_RETURN_IF_ERROR(agree(checked, "start-up checks"));
  if (!opts_.resume) {
    // Data parallelism: every replica takes rank 0's state (DDP broadcasts it too). Pipelines:
    // every stage loaded its own part of the model, and so did every tensor-parallel rank.
    if (comm_ && world_ > 1 && !pipeline_ && plan_.mesh().tp() <= 1)
      DTC_RETURN_IF_ERROR(broadcastState());
    return Status::ok();
  }
  // Every rank resumes from rank 0's choice: it sends the manifest (its path and text).
  Status parsed = Status::ok();
  if (comm_ && world_ > 1) {
    const std::string text = rank_ == 0 ? serializeManifest(manifest) : std::string();
    uint64_t sizes[2] = {manifest.path.size(), text.size()};
    DTC_RETURN_IF_ERROR(
        comm_->broadcast(sizes, sizeof sizes, 0, "broadcast of the checkpoint manifest's size"));
    std::string bytes = rank_ == 0 ? manifest.path + text : std::string();
    bytes.resize(sizes[0] + sizes[1]);
    DTC_RETURN_IF_ERROR(
        comm_->broadcast(bytes.data(), bytes.size(), 0, "broadcast of the checkpoint manifest"));
    if (rank_ != 0) {
      Expected<Manifest> mf = parseManifest(bytes.substr(sizes[0]), bytes.substr(0, sizes[0]));
      if (mf)
        manifest = std::move(*mf);
      else
        parsed = mf.status();
    }
  }
  DTC_RETURN_IF_ERROR(agree(parsed.isOk() ? restoreShard(manifest) : parsed, "--resume"));
  const CheckpointMeta &m = manifest.meta;
  step = m.step;
  epochTotals.lossSum = m.epochLossSum;
  epochTotals.steps = m.epochSteps;
  epochTotals.correct = m.epochCorrect;
  epochTotals.counted = m.epochCounted;
  seed_ = m.seed;
  shuffle_ = m.shuffle;
  if (opts_.progress && rank_ == 0)
    std::fprintf(opts_.progress, "resuming from %s (step %lld)\n", manifest.path.c_str(),
                 static_cast<long long>(m.step));
  return Status::ok();
}

} // namespace dtc::rt::detail
