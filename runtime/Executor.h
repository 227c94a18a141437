// The executor (DESIGN.md section 8): loads one rank's program from a validated plan onto a
// device (arena, weights from the source model, constants, one kernel per instruction) and runs
// it step by step. Inference: setInput for every graph input, run(), then outputs(). Training
// (runtime/Trainer.h) also runs instruction ranges and reads and writes buffers by index.
#pragma once

#include "compiler/plan/Plan.h"
#include "runtime/Device.h"
#include "runtime/DeviceComm.h"
#include "runtime/Profiler.h"
#include "runtime/comm/Communicator.h"
#include "runtime/io/Npy.h"

#include <memory>
#include <string>
#include <vector>

namespace dtc::rt {

class Communicator;
class Tracer;

struct ExecutorOptions {
  /// The plan file, for messages and to resolve a relative model path against its folder.
  std::string planPath;
  /// The source model to read weights from instead of the one the plan names (its checksum
  /// must still match the plan's).
  std::string modelPath;
  int rank = 0;
  /// The program to run instead of the rank's (-1): a parameter server's, which no rank runs
  /// (Plan.parameter_host). Must be in range of the validated plan's programs.
  int program = -1;
  /// OpenMP threads for the CPU kernels (0: the OpenMP default).
  int threads = 0;
  /// CUDA plans: the most workspace, in MiB, a kernel may ask cuDNN for (dtc-run
  /// --cuda-workspace-mb).
  int cudaWorkspaceMb = 256;
  /// CUDA plans with collectives: the device communicator's timeout (dtc-run --timeout).
  double commTimeoutSeconds = 60;
  /// Time every instruction (see Profiler).
  bool profile = false;
  /// The job's communicator: needed by plans with collectives (data parallelism); it runs their
  /// Collective instructions (on a CUDA plan it bootstraps the device communicator, NCCL, which
  /// runs them instead) and synchronized BatchNormalization. Not owned; null on one rank.
  Communicator *comm = nullptr;
  /// Records every instruction as a trace event (--trace). Not owned; may be null.
  Tracer *tracer = nullptr;
};

/// plan::validatePlan with every kernel call of the plan's programs checked against the kernels
/// of its device kind (op known, arity, dtypes, attributes). Programs read as summaries (no
/// instructions) get the structural checks only. What Executor::create runs first, and
/// `dtc-run --validate`.
Status validateRunnablePlan(const plan::Plan &plan, const std::string &where);

class Executor {
public:
  /// Validates `plan` (structure and every instruction against the kernel registry), checks the
  /// source model's checksum, allocates the arena, uploads weights and constants and makes the
  /// kernels. Errors name the plan, rank, buffer, instruction or model file.
  static Expected<std::unique_ptr<Executor>> create(plan::Plan plan, const ExecutorOptions &opts);
  ~Executor();

  const plan::Plan &plan() const { return plan_; }
  const plan::RankProgram &program() const {
    return opts_.program >= 0 ? plan_.programs(opts_.program) : plan::programOf(plan_, opts_.rank);
  }

  /// Copies `array` into the input named `array.name`. Errors: "input 'x': ..." for an unknown
  /// name (listing the expected inputs), a different dtype or shape (showing what is expected).
  Status setInput(const HostArray &array);
  /// Runs every instruction once. Errors: an input that was never set, a kernel failure
  /// ("rank 0: instruction 3 (node 'x' (Gather)): ...").
  Status run() { return run(0, numInstructions()); }
  /// Runs instructions [begin, end) in order (training: [0, optimizer_begin) once per
  /// micro-batch, then the optimizer part once per step). Same errors as run(); a range outside
  /// [0, numInstructions()] is an error.
  Status run(int begin, int end);
  int numInstructions() const { return static_cast<int>(steps_.size()); }
  /// Copies every graph output to host arrays, in the plan's output order.
  Expected<std::vector<HostArray>> outputs();
  /// Copies the graph output named `name`. Errors: "output 'x': the plan has no output of that
  /// name".
  Expected<HostArray> output(const std::string &name);

  /// Buffer `index` of this rank as a host array named after the buffer, in its logical
  /// row-major order (channels-last buffers are converted). Errors: an index out of range.
  Expected<HostArray> readBuffer(int index);
  /// Overwrites buffer `index` with `array` (logical row-major; converted to the buffer's
  /// layout). Errors ("buffer 'x': ..."): index out of range, another dtype or shape.
  Status writeBuffer(int index, const HostArray &array);
  /// The source model the weights were read from ("" when the plan has no parameters).
  const std::string &modelFile() const { return modelFile_; }

  const Profiler &profiler() const { return profiler_; }
  /// Forgets the times recorded so far (warm-up runs).
  void resetProfile() { profiler_.clear(); }
  uint64_t arenaBytes() const { return program().arena_bytes(); }
  /// The device the program runs on ("cpu:0", "cuda:1").
  const Device &device() const { return *device_; }

private:
  Executor(plan::Plan plan, const ExecutorOptions &opts);
  Status load();
  plan::Plan plan_;
  ExecutorOptions opts_;
  /// What kernels that reduce over ranks (synchronized BatchNorm) reduce over: the rank's dp
  /// group (in a pipeline, the replicas of its stage), or the world without a plan group.
  std::unique_ptr<ops::KernelCollectives> kernelCollectives_;
  std::unique_ptr<Device> device_;
  /// A CUDA plan's collectives run on the device's communicator (owned by the device); null on
  /// the CPU, whose collectives run on opts_.comm.
  DeviceCommunicator *deviceComm_ = nullptr;
  /// The arena is host memory (the CPU device): copy steps run inline.
  bool hostArena_ = false;
  enum class StepKind { kKernel, kCopy, kCollective, kWait };
  struct Step {
    StepKind kind = StepKind::kKernel;
    ops::KernelPtr kernel; // kKernel
    std::vector<const void *> inputs;
    std::vector<void *> outputs;
    uint64_t copyBytes = 0;          // kCopy
    std::vector<size_t> operandBytes; // kCollective
    int dtype = 0;                    // kCollective (ONNX dtype number)
    ReduceOp op = ReduceOp::kSum;     // kCollective
    CommKind commKind = CommKind::kAllReduce; // kCollective
    int group = 0;                            // kCollective: communicator group id (0: the world)
    int peer = -1;                    // kCollective: send/recv peer, broadcast root (world rank)
    int tag = 0;                      // kCollective: send/recv
    // kCollective: CommRequest::persistent (collectives of the dp axis: its members run one
    // program, so their arenas are laid out alike and make the same cache hits and misses).
    bool persistent = false;
    int collective = -1;              // kWait: the instruction index of its collective
    std::string name;                 // kCollective: "bucket 0"; trace/profile label
    std::string category;             // trace category (op type)
  };
  /// Runs one instruction (errors name the rank and the instruction).
  Status runStep(size_t i);
  /// Waits for every collective still in flight (on the device's communicator or the host's).
  Status waitAllCollectives();
  std::vector<Step> steps_;
  /// Handle of the collective launched by instruction i and not yet waited for.
  std::vector<uint64_t> inFlight_;
  std::vector<bool> launched_;
  std::vector<bool> inputSet_;
  Profiler profiler_;
  std::string modelFile_;
};

/// Where the executor reads the plan's source model: `opts.modelPath` when given, else the
/// plan's model path (relative to the plan file's folder), else a file of the same name next
/// to the plan. Errors: the plan names no model, or no such file (saying where it looked). The
/// checksum is not checked here.
Expected<std::string> resolveModelPath(const plan::Plan &plan, const ExecutorOptions &opts);

/// Builds the kernel spec of a plan instruction (op, attributes, operand types from the buffers;
/// in an inference plan parameters are marked constant). Operand indices must already be
/// validated.
Expected<ops::KernelSpec> kernelSpecOf(const plan::RankProgram &rank, const plan::KernelCall &call,
                                       bool inference);

} // namespace dtc::rt
