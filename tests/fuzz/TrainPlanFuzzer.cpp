// libFuzzer target fuzz_train: arbitrary bytes as a training plan through dtc-run's training
// path (rt::train, what `dtc-run PLAN --data D.npz` runs on one rank), not only --infer's.
// train() must refuse every malformed plan with an error and never read an index before it
// validated the plan (issue 13, finding 1: out-of-range instruction outputs, input bindings
// and a plan without rank programs crashed it). Small valid one-rank plans train two steps on
// zero data made to the plan's own data inputs, with the weights of the seeds' models
// (DTC_FUZZ_MODEL_DIR: models/mlp_seed.onnx and models/cnn_train.onnx), so the training
// kernels, the optimizer and the loss meet mutated shapes and attributes too. Nothing is
// written except the data file in a private temporary folder.
#include "compiler/plan/Plan.h"
#include "runtime/DataLoader.h"
#include "runtime/Trainer.h"
#include "runtime/io/Npy.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace dtc;

/// A private folder for the generated data file, made once and removed at exit.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    path = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    path += "/dtc-fuzz-train.XXXXXX";
    if (!::mkdtemp(path.data()))
      std::abort();
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::string &scratchDir() {
  static const ScratchDir dir;
  return dir.path;
}

/// The model the seeds were compiled from whose file name the plan records (the others' name
/// mlp_seed.onnx: a mutated plan then fails its checksum check, as dtc-run does).
std::string modelFor(const plan::Plan &p) {
  const std::string name = std::filesystem::path(p.model().path()).filename().string();
  const std::string dir = DTC_FUZZ_MODEL_DIR;
  return dir + "/" + (name == "cnn_train.onnx" ? name : std::string("mlp_seed.onnx"));
}

/// Writes zero-valued data for the plan's data inputs (one step: the batch times the micro-batch
/// count), or returns false when the plan's inputs cannot be made (dataInputsOf refuses them,
/// or they are too large).
bool writeData(const plan::Plan &p, const std::string &path) {
  auto inputs = rt::dataInputsOf(p, 0);
  const int64_t microBatches = std::max<int64_t>(1, p.hyperparameters().grad_accum_steps());
  if (!inputs || microBatches > 64)
    return false;
  std::vector<rt::HostArray> arrays;
  uint64_t total = 0;
  for (const rt::DataInput &in : *inputs) {
    rt::HostArray a;
    a.name = in.array;
    a.dtype = in.dtype;
    a.shape = in.shape;
    if (!a.shape.empty())
      a.shape[0] *= microBatches;
    uint64_t n = 1;
    for (int64_t d : a.shape) {
      if (d < 0 || d > (int64_t{1} << 20))
        return false;
      n *= static_cast<uint64_t>(d);
      if (n > (uint64_t{1} << 22))
        return false;
    }
    const int64_t size = ir::dtypeSize(in.dtype);
    if (size <= 0)
      return false;
    total += n * static_cast<uint64_t>(size);
    if (total > (uint64_t{16} << 20))
      return false;
    a.bytes.assign(n * static_cast<uint64_t>(size), '\0');
    arrays.push_back(std::move(a));
  }
  return rt::writeNpz(path, arrays).isOk();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string bytes(reinterpret_cast<const char *>(data), size);
  Expected<plan::Plan> parsed = plan::parsePlan(bytes, "fuzz.dtc");
  if (!parsed)
    return 0;
  plan::Plan p = std::move(*parsed);
  // dtc-run trains one-rank plans without a communicator; the others need MPI.
  if (p.mode() != plan::MODE_TRAINING || p.world_size() != 1 || p.groups_size() != 0)
    return 0;
  const std::string dataPath = scratchDir() + "/data.npz";
  // Small valid plans get data of their own shapes; the others get none, and train() must
  // refuse them before it reads the data file (checkTrainingPlan and validatePlan come first).
  std::filesystem::remove(dataPath);
  const bool valid = rt::checkTrainingPlan(p, "fuzz.dtc").isOk() &&
                     plan::validatePlan(p, "fuzz.dtc").isOk();
  if (valid) {
    const plan::RankProgram &program = plan::programOf(p, 0);
    if (program.arena_bytes() > (uint64_t{64} << 20) || program.instructions_size() > 256 ||
        p.ranks(0).device().type() != plan::DEVICE_CPU || !writeData(p, dataPath))
      return 0;
  }
  rt::TrainOptions opts;
  opts.planPath = "fuzz.dtc";
  opts.modelPath = modelFor(p);
  opts.dataPath = dataPath;
  opts.steps = 2;
  opts.threads = 1;
  opts.progress = nullptr;
  opts.allowNonFiniteLoss = true;
  Status s = rt::train(std::move(p), opts);
  // DTC_FUZZ_TRAIN_VERBOSE=1 shows what each input came to (checking a corpus reaches training).
  static const bool verbose = std::getenv("DTC_FUZZ_TRAIN_VERBOSE") != nullptr;
  if (verbose)
    std::fprintf(stderr, "fuzz_train: %s\n", s.isOk() ? "trained 2 steps" : s.message().c_str());
  // An invalid plan is always an error (never a successful run on garbage indices).
  if (!valid && s.isOk())
    __builtin_trap();
  return 0;
}
