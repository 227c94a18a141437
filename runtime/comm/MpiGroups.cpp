// MpiCommunicator (MpiCommunicator.h): communicator groups (lists checked alike on every rank,
// then MPI_Comm_split) and the start-up check that every rank runs the same plan.
#include "runtime/comm/MpiCommunicator.h"

namespace dtc::rt::mpi {

// --- groups ---------------------------------------------------------------------------------

int MpiCommunicator::sizeOf(int group) const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex &>(mu_));
  if (group < 0 || static_cast<size_t>(group) >= groups_.size())
    return 0;
  return static_cast<int>(groups_[static_cast<size_t>(group)]->ranks.size());
}

int MpiCommunicator::rankIn(int group) const {
  std::lock_guard<std::mutex> lock(const_cast<std::mutex &>(mu_));
  if (group < 0 || static_cast<size_t>(group) >= groups_.size())
    return -1;
  return groups_[static_cast<size_t>(group)]->myRank;
}

/// FNV-1a 64 (Fowler, Noll, Vo) over `n` bytes from `seed` xor the offset basis, then a
/// finalizer (FNV's low bits mix poorly): the hashes ranks compare to agree on lists and plans.
uint64_t mixedHash(const void *data, size_t n, uint64_t seed) {
  uint64_t h = 14695981039346656037ULL ^ seed;
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return h;
}

/// 62 bits of a hash of one group's rank list, so that its negation fits an int64 (the check
/// all-reduces max(h) and max(-h)).
int64_t groupHash(const std::vector<int> &ranks) {
  return static_cast<int64_t>(
      mixedHash(ranks.data(), ranks.size() * sizeof(int), ranks.size()) >> 2);
}

Status MpiCommunicator::createGroups(const std::vector<std::vector<int>> &groups) {
  auto t = std::make_shared<Task>();
  t->op = Op::kExclusive;
  t->kind = "create groups";
  t->name = std::to_string(groups.size()) + " groups";
  {
    std::lock_guard<std::mutex> lock(mu_);
    t->g = groups_.front();
  }
  t->exclusive = [this, groups](Task &task) { return runCreateGroups(task, groups); };
  return wait(enqueue(std::move(t), Status::ok(), /*wake=*/false, /*startNow=*/false));
}

Status MpiCommunicator::runCreateGroups(Task &t, const std::vector<std::vector<int>> &groups) {
  // 1. This rank's verdict on its lists; every rank learns the worst (a flag and the count).
  std::string localError;
  for (size_t i = 0; i < groups.size() && localError.empty(); ++i) {
    const std::vector<int> &g = groups[i];
    const std::string name = "group " + std::to_string(i + 1) + " " + listRanks(g);
    if (g.empty())
      localError = name + " is empty";
    std::vector<bool> seen(static_cast<size_t>(size_), false);
    for (int r : g) {
      if (r < 0 || r >= size_) {
        localError = name + ": rank " + std::to_string(r) + " is outside the world (size " +
                     std::to_string(size_) + ")";
        break;
      }
      if (seen[static_cast<size_t>(r)]) {
        localError = name + " lists rank " + std::to_string(r) + " twice";
        break;
      }
      seen[static_cast<size_t>(r)] = true;
    }
  }
  const int64_t count = static_cast<int64_t>(groups.size());
  // max over the ranks of: (the highest rank with an invalid list) + 1, count, -count.
  int64_t head[3] = {localError.empty() ? 0 : rank_ + 1, count, -count};
  // In-place max over the world, under the watchdog; a failure breaks the communicator.
  auto maxOverRanks = [&](int64_t *values, int n) -> Status {
    std::vector<MPI_Request> reqs(1, MPI_REQUEST_NULL);
    const int rc =
        MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_INT64_T, MPI_MAX, comm_, reqs.data());
    Status s = rc == MPI_SUCCESS ? driveAlone(t, reqs)
                                 : taskError(t, "MPI error: " + mpiErrorString(rc));
    t.breaks = t.breaks || !s.isOk();
    return s;
  };
  DTC_RETURN_IF_ERROR(maxOverRanks(head, 3));
  if (!localError.empty())
    return taskError(t, localError);
  if (head[0] != 0)
    return taskError(t, "rank " + std::to_string(head[0] - 1) +
                            " has invalid group lists (the lists differ between ranks)");
  if (head[1] != -head[2])
    return taskError(t, "the ranks pass different numbers of groups (" + std::to_string(-head[2]) +
                            " to " + std::to_string(head[1]) + "; this rank " +
                            std::to_string(count) + ")");
  // 2. The same lists everywhere: max(h) == -max(-h) for every group's hash.
  std::vector<int64_t> hashes(2 * groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    hashes[i] = groupHash(groups[i]);
    hashes[groups.size() + i] = -hashes[i];
  }
  if (!hashes.empty()) {
    DTC_RETURN_IF_ERROR(maxOverRanks(hashes.data(), static_cast<int>(hashes.size())));
    for (size_t i = 0; i < groups.size(); ++i)
      if (hashes[i] != -hashes[groups.size() + i])
        return taskError(t, "group " + std::to_string(i + 1) +
                                " differs between ranks (this rank: " + listRanks(groups[i]) + ")");
  }
  // 3. Communicators: groups without a common rank share one MPI_Comm_split (a dp x pp mesh
  // needs two). MPI_Comm_split is blocking: the peers were all alive a moment ago (step 2).
  std::vector<std::shared_ptr<Group>> made;
  std::vector<int> layerOf(groups.size(), -1);
  std::vector<std::vector<bool>> used; // per layer: ranks taken
  for (size_t i = 0; i < groups.size(); ++i) {
    auto g = std::make_shared<Group>();
    g->ranks = groups[i];
    for (size_t k = 0; k < g->ranks.size(); ++k)
      if (g->ranks[k] == rank_)
        g->myRank = static_cast<int>(k);
    made.push_back(g);
    size_t layer = 0;
    for (; layer < used.size(); ++layer)
      if (std::none_of(groups[i].begin(), groups[i].end(),
                       [&](int r) { return used[layer][static_cast<size_t>(r)]; }))
        break;
    if (layer == used.size())
      used.emplace_back(static_cast<size_t>(size_), false);
    for (int r : groups[i])
      used[layer][static_cast<size_t>(r)] = true;
    layerOf[i] = static_cast<int>(layer);
  }
  for (size_t layer = 0; layer < used.size(); ++layer) {
    int color = MPI_UNDEFINED, key = 0;
    size_t mine = groups.size();
    for (size_t i = 0; i < groups.size(); ++i)
      if (layerOf[i] == static_cast<int>(layer) && made[i]->myRank >= 0) {
        color = static_cast<int>(i);
        key = made[i]->myRank;
        mine = i;
      }
    MPI_Comm c = MPI_COMM_NULL;
    const int rc = MPI_Comm_split(comm_, color, key, &c);
    if (rc != MPI_SUCCESS) {
      t.breaks = true;
      return taskError(t, "MPI_Comm_split failed: " + mpiErrorString(rc));
    }
    if (mine < groups.size()) {
      MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
      made[mine]->comm = c;
    }
  }
  // 4. Replace the old groups (every request on them has completed: this task runs alone).
  std::vector<std::shared_ptr<const Group>> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old.assign(groups_.begin() + 1, groups_.end());
    groups_.resize(1);
    for (auto &g : made)
      groups_.push_back(g);
  }
  dropPersistent(1); // group ids 1..n name the new groups from now on
  for (auto &g : old)
    if (g->comm != MPI_COMM_NULL) {
      MPI_Comm c = g->comm;
      MPI_Comm_free(&c);
    }
  entered_.resize(1);
  entered_.resize(groups.size() + 1, 0);
  return Status::ok();
}

// --- checkSameJob ---------------------------------------------------------------------------

/// The fixed-size record every rank contributes: a 32-byte digest of the fingerprint (four
/// FNV-1a hashes with different seeds, plus the length), the sizes, and the plan path.
struct JobRecord {
  uint64_t digest[4];
  uint64_t fingerprintLength;
  int32_t planWorldSize;
  int32_t mpiSize;
  char path[192];
};

void digest(const std::string &s, uint64_t out[4]) {
  for (int k = 0; k < 4; ++k)
    out[k] = mixedHash(s.data(), s.size(), 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(k + 1));
}

std::string recordPath(const JobRecord &r) { return std::string(r.path, strnlen(r.path, 192)); }

Status MpiCommunicator::checkSameJob(const std::string &fingerprint, int planWorldSize,
                                     const std::string &planPath) {
  JobRecord mine;
  std::memset(&mine, 0, sizeof mine);
  digest(fingerprint, mine.digest);
  mine.fingerprintLength = fingerprint.size();
  mine.planWorldSize = planWorldSize;
  mine.mpiSize = size_;
  // Keep the tail of a long path (the file name matters most).
  std::string path = planPath.size() < sizeof mine.path
                         ? planPath
                         : "..." + planPath.substr(planPath.size() - (sizeof mine.path - 4));
  std::memcpy(mine.path, path.data(), path.size());
  std::vector<JobRecord> all(static_cast<size_t>(size_));
  DTC_RETURN_IF_ERROR(allGather(&mine, sizeof mine, all.data(), "check same job"));

  // Every rank evaluates the same table: the same verdict everywhere.
  const JobRecord &r0 = all[0];
  std::vector<std::string> problems;
  int differing = 0;
  for (size_t r = 1; r < all.size(); ++r) {
    const JobRecord &x = all[r];
    if (std::memcmp(x.digest, r0.digest, sizeof r0.digest) != 0 ||
        x.fingerprintLength != r0.fingerprintLength) {
      if (++differing <= 4)
        problems.push_back("rank " + std::to_string(r) + " runs plan " + recordPath(x) +
                           " whose fingerprint differs from rank 0's (" + recordPath(r0) + ")");
    }
  }
  if (differing > 4)
    problems.push_back("and " + std::to_string(differing - 4) + " more ranks");
  if (differing == 0 && r0.planWorldSize != r0.mpiSize)
    problems.push_back("the plan is for " + std::to_string(r0.planWorldSize) +
                       " ranks, the job has " + std::to_string(r0.mpiSize) +
                       ": start it with dtc-run --nproc " + std::to_string(r0.planWorldSize) +
                       " or mpirun -n " + std::to_string(r0.planWorldSize) +
                       " (the world size of its --strategy, dp x pp x tp)");
  if (problems.empty())
    return Status::ok();
  std::string msg;
  for (const std::string &p : problems)
    msg += (msg.empty() ? "" : "; ") + p;
  return Status::error(msg);
}

} // namespace dtc::rt::mpi
