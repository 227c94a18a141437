// Plan loading and execution on one device (see Executor.h).
#include "runtime/Executor.h"

#include "runtime/PlanUtil.h"

#include "compiler/ir/Sharding.h"
#include "compiler/support/FileIO.h"
#include "runtime/Trace.h"
#include "runtime/comm/Communicator.h"
#include "runtime/io/WeightReader.h"

#include <algorithm>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>

namespace dtc::rt {

namespace {

/// "f32[2,3]": the text kernels use for operand types (ops::TensorDesc::str).
ops::TensorDesc descOf(const plan::Buffer &b, bool inference) {
  ops::TensorDesc d;
  d.dtype = static_cast<ir::DType>(b.dtype());
  d.shape = shapeOf(b);
  d.layout = b.layout() == plan::LAYOUT_CHANNELS_LAST ? ops::Layout::kChannelsLast
                                                      : ops::Layout::kRowMajor;
  // Weights never change in an inference plan; constants never change at all.
  d.constant =
      b.kind() == plan::BUFFER_CONSTANT || (inference && b.kind() == plan::BUFFER_PARAMETER);
  return d;
}

ir::Attribute toIrAttr(const plan::Attr &a) {
  switch (a.value_case()) {
  case plan::Attr::kI:
    return ir::Attribute(static_cast<int64_t>(a.i()));
  case plan::Attr::kF:
    return ir::Attribute(a.f());
  case plan::Attr::kS:
    return ir::Attribute(a.s());
  case plan::Attr::kInts:
    return ir::Attribute(std::vector<int64_t>(a.ints().values().begin(), a.ints().values().end()));
  case plan::Attr::kFloats:
    return ir::Attribute(
        std::vector<float>(a.floats().values().begin(), a.floats().values().end()));
  case plan::Attr::kStrings:
    return ir::Attribute(
        std::vector<std::string>(a.strings().values().begin(), a.strings().values().end()));
  case plan::Attr::kT: {
    const plan::TensorValue &t = a.t();
    return ir::Attribute(ir::TensorDataPtr(ir::TensorData::fromBytes(
        a.name(), static_cast<ir::DType>(t.dtype()),
        std::vector<int64_t>(t.shape().begin(), t.shape().end()), t.data())));
  }
  case plan::Attr::VALUE_NOT_SET:
    break;
  }
  return ir::Attribute();
}

} // namespace

Expected<ops::KernelSpec> kernelSpecOf(const plan::RankProgram &rank, const plan::KernelCall &call,
                                       bool inference) {
  ops::KernelSpec spec;
  spec.op = call.op();
  spec.domain = call.domain();
  spec.node = call.node();
  for (int32_t b : call.inputs()) {
    ops::TensorDesc d;
    if (b >= 0)
      d = descOf(rank.buffers(b), inference);
    spec.inputs.push_back(std::move(d));
  }
  for (int32_t b : call.outputs()) {
    ops::TensorDesc d;
    if (b >= 0)
      d = descOf(rank.buffers(b), inference);
    spec.outputs.push_back(std::move(d));
  }
  for (const plan::Attr &a : call.attributes()) {
    if (a.value_case() == plan::Attr::VALUE_NOT_SET)
      return spec.error("attribute '" + a.name() + "' has no value");
    if (a.value_case() == plan::Attr::kT) {
      const plan::TensorValue &t = a.t();
      if (!ir::isKnownDType(t.dtype()) || ir::dtypeSize(static_cast<ir::DType>(t.dtype())) == 0)
        return spec.error("attribute '" + a.name() + "': unknown tensor dtype");
      std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
      std::optional<int64_t> n = ir::checkedProduct(shape);
      int64_t bytes = 0;
      if (!n ||
          __builtin_mul_overflow(*n, ir::dtypeSize(static_cast<ir::DType>(t.dtype())), &bytes) ||
          static_cast<uint64_t>(bytes) != t.data().size())
        return spec.error("attribute '" + a.name() + "': tensor data does not match its shape");
    }
    spec.attrs[a.name()] = toIrAttr(a);
  }
  return spec;
}

Expected<std::string> resolveModelPath(const plan::Plan &plan, const ExecutorOptions &opts) {
  const std::string &where = opts.planPath;
  // The plan names its model relative to the plan's own folder. A model given with --model,
  // or a copy next to the plan, is accepted too: the checksum decides.
  std::filesystem::path named = plan.model().path();
  if (named.empty() && opts.modelPath.empty())
    return Status::error(where, "the plan has parameters but names no source model");
  std::filesystem::path planDir = std::filesystem::path(opts.planPath).parent_path();
  std::filesystem::path modelPath = named;
  if (named.is_relative())
    modelPath = planDir / named;
  std::error_code ec;
  if (!opts.modelPath.empty()) {
    modelPath = opts.modelPath;
  } else if (!std::filesystem::is_regular_file(modelPath, ec) &&
             std::filesystem::is_regular_file(planDir / named.filename(), ec)) {
    modelPath = planDir / named.filename();
  } else if (!std::filesystem::is_regular_file(modelPath, ec)) {
    return Status::error(where, "the plan's model '" + named.string() + "' (" +
                                    (named.is_relative() ? "relative to the plan's folder, " : "") +
                                    "so " + modelPath.lexically_normal().string() +
                                    ") is not a file; keep the plan and the model in the same "
                                    "relative places, put the model next to the plan, or pass "
                                    "--model PATH");
  }
  return modelPath.lexically_normal().string();
}

Executor::Executor(plan::Plan plan, const ExecutorOptions &opts)
    : plan_(std::move(plan)), opts_(opts) {}
Executor::~Executor() {
  // A run that failed after launching collectives leaves them writing into the arena: let them
  // finish before the arena goes (a lost peer fails them within the communicator's timeout).
  if (std::find(launched_.begin(), launched_.end(), true) != launched_.end()) {
    Status drained = waitAllCollectives();
    (void)drained; // the run's own error is the one reported
  }
}

Status Executor::waitAllCollectives() {
  if (deviceComm_)
    return deviceComm_->waitAll();
  return opts_.comm ? opts_.comm->waitAll() : Status::ok();
}

Expected<std::unique_ptr<Executor>> Executor::create(plan::Plan plan, const ExecutorOptions &opts) {
  std::unique_ptr<Executor> ex(new Executor(std::move(plan), opts));
  DTC_RETURN_IF_ERROR(ex->load());
  return ex;
}

Status validateRunnablePlan(const plan::Plan &plan, const std::string &where) {
  // Instructions are checked against the kernels of the plan's device kind (the CUDA target's
  // checks are plain C++: a CUDA plan validates in a build without CUDA too).
  const bool cudaPlan =
      std::any_of(plan.ranks().begin(), plan.ranks().end(),
                  [](const plan::RankInfo &r) { return r.device().type() == plan::DEVICE_CUDA; });
  const ops::Target &target =
      ops::targetFor(cudaPlan ? ops::DeviceKind::kCuda : ops::DeviceKind::kCpu);
  return plan::validatePlan(
      plan, where, [&](const plan::RankProgram &rank, const plan::KernelCall &call) -> Status {
        DTC_ASSIGN_OR_RETURN(ops::KernelSpec spec,
                             kernelSpecOf(rank, call, plan.mode() == plan::MODE_INFERENCE));
        return target.checkKernel(spec);
      });
}

Status Executor::load() {
  const std::string where = opts_.planPath;
  DTC_RETURN_IF_ERROR(validateRunnablePlan(plan_, where));
  if (opts_.rank < 0 || opts_.rank >= plan_.world_size())
    return Status::error(where, "rank " + std::to_string(opts_.rank) +
                                    " is outside the plan's world (size " +
                                    std::to_string(plan_.world_size()) + ")");
  if (opts_.program >= plan_.programs_size())
    return Status::error(where, "program " + std::to_string(opts_.program) +
                                    " is not one of the plan's " +
                                    std::to_string(plan_.programs_size()));
  const plan::RankProgram &rp = program();
  const std::string rankWhere =
      (where.empty() ? "" : where + ": ") +
      (opts_.program >= 0 ? "program " + std::to_string(opts_.program)
                          : "rank " + std::to_string(opts_.rank));
  if (rp.summary())
    return Status::error(rankWhere, "its program was read without its instructions (the plan "
                                    "was read for another rank)");
  // The device first: a plan for a GPU this process cannot use fails before weights are read.
  {
    const plan::Device &dev = plan_.ranks(opts_.rank).device();
    DeviceOptions dopts;
    dopts.threads = opts_.threads;
    dopts.cudaWorkspaceLimit = static_cast<size_t>(std::max(opts_.cudaWorkspaceMb, 0)) << 20;
    auto device = createDevice(dev.type() == plan::DEVICE_CUDA ? ops::DeviceKind::kCuda
                                                               : ops::DeviceKind::kCpu,
                               dev.index(), dopts);
    if (!device) // "rank 0 runs on cuda:0 but ..."
      return Status::error(rankWhere + " " + device.status().message());
    device_ = device.takeValue();
    hostArena_ = device_->kind() == ops::DeviceKind::kCpu;
  }

  // Weights: re-read from the source model after checking it is the file the plan was made from.
  bool needsModel = false;
  for (const plan::Buffer &b : rp.buffers())
    needsModel = needsModel || b.kind() == plan::BUFFER_PARAMETER;
  std::unique_ptr<WeightReader> weights;
  if (needsModel) {
    DTC_ASSIGN_OR_RETURN(const std::string modelFile, resolveModelPath(plan_, opts_));
    if (plan_.model().checksum().empty())
      return Status::error(where, "the plan reads parameters from " + modelFile +
                                      " but records no checksum of it; recompile the plan");
    DTC_RETURN_IF_ERROR(checkInputFile(modelFile, "the plan's model", kMaxModelFileBytes));
    // The plan was validated: its checksums are by an algorithm checksumFile knows.
    const plan::ModelRef &ref = plan_.model();
    DTC_ASSIGN_OR_RETURN(std::string checksum,
                         plan::checksumFile(modelFile, "the plan's model", kMaxModelFileBytes,
                                            ref.checksum_algorithm()));
    // The file's own checksum is not printed: a plan may name any file.
    if (checksum != ref.checksum())
      return Status::error(modelFile, "is not the model the plan was compiled against (its " +
                                          plan::checksumAlgorithmName(ref.checksum_algorithm()) +
                                          " checksum differs from the plan's " +
                                          ref.checksum().substr(0, 16) + "...); recompile the plan");
    // Its external data too: weights are read from those files.
    for (const plan::ExternalFile &x : plan_.model().external_data()) {
      const std::string file =
          (std::filesystem::path(modelFile).parent_path() / x.location()).string();
      DTC_RETURN_IF_ERROR(checkInputFile(file, "the model's external data", kMaxExternalDataBytes));
      DTC_ASSIGN_OR_RETURN(std::string fileChecksum,
                           plan::checksumFile(file, "the model's external data",
                                              kMaxExternalDataBytes, x.checksum_algorithm()));
      if (fileChecksum != x.checksum())
        return Status::error(file, "is not the external data the plan was compiled against (its " +
                                       plan::checksumAlgorithmName(x.checksum_algorithm()) +
                                       " checksum differs from the plan's " +
                                       x.checksum().substr(0, 16) + "...); recompile the plan");
    }
    // Only the initializers' bytes are needed (and of a shard, only its part): the weight reader
    // parses the file once and reads each parameter lazily, without importing the model.
    WeightReader::Options wo;
    wo.untieInitializers = plan_.model().untie_initializers();
    DTC_ASSIGN_OR_RETURN(weights, WeightReader::open(modelFile, wo));
    modelFile_ = modelFile;
  }

  bool hasCollectives = false;
  for (const plan::Instruction &ins : rp.instructions())
    hasCollectives = hasCollectives || ins.has_collective();
  if (hasCollectives && !opts_.comm)
    return Status::error(rankWhere, "the plan has collectives (data parallelism over " +
                                        std::to_string(plan_.world_size()) +
                                        " ranks) but runs without a communicator");
  // One communicator per plan group (ids shifted by one: the communicator's group 0 is the
  // world), created by every rank together; a collective naming axis "dp" runs on this rank's
  // dp group, and point-to-point peers are group ranks turned into world ranks here.
  std::map<std::string, int> groupOfAxis;
  std::vector<std::vector<int>> lists;
  if (opts_.comm && plan_.groups_size() > 0) {
    for (const plan::CommGroup &g : plan_.groups())
      lists.emplace_back(g.ranks().begin(), g.ranks().end());
    DTC_RETURN_IF_ERROR(opts_.comm->createGroups(lists).withContext(rankWhere));
    for (int32_t g : plan_.ranks(opts_.rank).groups())
      groupOfAxis[plan_.groups(g).axis()] = g;
  }
  if (opts_.comm && plan_.world_size() > 1) {
    // On a GPU the collectives run on the device's communicator (NCCL, bootstrapped over the
    // host communicator, with the same groups); the CPU device returns null. Its bootstrap is
    // collective over the world, so every rank makes it, with collectives of its own or not.
    CommOptions co;
    co.timeoutSeconds = opts_.commTimeoutSeconds;
    co.tracer = opts_.tracer;
    auto dc = device_->createCommunicator(*opts_.comm, lists, co);
    if (!dc)
      return dc.status().withContext(rankWhere);
    deviceComm_ = *dc;
  }
  if (opts_.comm && groupOfAxis.count("dp")) {
    // Synchronized BatchNorm reduces over the stage's data-parallel replicas only.
    class GroupCollectives : public ops::KernelCollectives {
    public:
      GroupCollectives(Communicator &comm, int group, int size)
          : comm_(comm), group_(group), size_(size) {}
      Status allReduceSum(double *data, size_t count, const std::string &what) override {
        CommRequest r;
        r.kind = CommKind::kAllReduce;
        r.name = what;
        r.group = group_;
        r.dtype = ir::DType::kFloat64;
        r.op = ReduceOp::kSum;
        r.inputs = {data};
        r.outputs = {data};
        r.bytes = {count * sizeof(double)};
        return comm_.run(std::move(r));
      }
      int groupSize() const override { return size_; }

    private:
      Communicator &comm_;
      int group_, size_;
    };
    const int g = groupOfAxis.at("dp");
    kernelCollectives_ = std::make_unique<GroupCollectives>(*opts_.comm, g + 1,
                                                            plan_.groups(g).ranks_size());
  }
  device_->setCollectives(kernelCollectives_ ? kernelCollectives_.get()
                          : opts_.comm       ? static_cast<ops::KernelCollectives *>(opts_.comm)
                                             : nullptr);
  DTC_RETURN_IF_ERROR(device_->allocateArena(rp.arena_bytes(), rp.alignment()));

  // Gradients and optimizer state start at zero (the arena is zero-filled, but the bytes of a
  // buffer may be shared: zero them before constants and parameters are written).
  for (const plan::Buffer &buf : rp.buffers())
    if (buf.kind() == plan::BUFFER_OPTIMIZER_STATE || buf.kind() == plan::BUFFER_GRADIENT) {
      std::string zeros(buf.size_bytes(), '\0');
      DTC_RETURN_IF_ERROR(device_->upload(buf.offset(), zeros.data(), buf.size_bytes()));
    }
  for (int b = 0; b < rp.buffers_size(); ++b) {
    const plan::Buffer &buf = rp.buffers(b);
    if (buf.kind() == plan::BUFFER_CONSTANT) {
      DTC_RETURN_IF_ERROR(
          device_->upload(buf.offset(), plan::bufferData(plan_, buf).data(), buf.size_bytes()));
    } else if (buf.kind() == plan::BUFFER_PARAMETER) {
      const std::string bw = rankWhere + ": parameter '" + buf.source() + "'";
      if (!weights->has(buf.source()))
        return Status::error(bw, "not found among the model's initializers");
      auto info = weights->info(buf.source());
      if (!info)
        return info.status().withContext(rankWhere);
      // A tensor-parallel shard: the rank's part of the whole initializer.
      const std::vector<int64_t> whole =
          buf.has_shard() ? std::vector<int64_t>(buf.shard().whole_shape().begin(),
                                                 buf.shard().whole_shape().end())
                          : shapeOf(buf);
      const auto dtype = static_cast<ir::DType>(buf.dtype());
      if (info->dtype != dtype || info->dims != whole)
        return Status::error(bw, "the model has " + typeStr(info->dtype, info->dims) +
                                     ", the plan expects " + typeStr(dtype, whole));
      WeightRequest req{buf.source(), dtype, whole, std::nullopt};
      if (buf.has_shard() && buf.shard().group() == "ps") {
        // A parameter server's rows [begin, begin + rows) along axis 0 (validated in range).
        req.slice = WeightSlice{0, buf.shard().begin(), buf.shape(0), 1};
      } else if (buf.has_shard()) {
        // Tensor-parallel rank r's part r of each of the axis's blocks (ir::sliceShard), or its
        // rows of an uneven split.
        const plan::ShardSpec &sp = buf.shard();
        req.slice =
            WeightSlice::tensorParallel(sp.axis(), whole[static_cast<size_t>(sp.axis())],
                                        sp.parts(), sp.blocks(), plan_.ranks(opts_.rank).tp());
      }
      if (hostArena_) { // straight into the arena (validated: the buffer lies inside it)
        DTC_RETURN_IF_ERROR(weights
                                ->readInto(req, static_cast<char *>(device_->arenaAt(buf.offset())),
                                           buf.size_bytes())
                                .withContext(rankWhere));
      } else {
        std::string bytes(buf.size_bytes(), '\0');
        DTC_RETURN_IF_ERROR(
            weights->readInto(req, bytes.data(), bytes.size()).withContext(rankWhere));
        DTC_RETURN_IF_ERROR(device_->upload(buf.offset(), bytes.data(), buf.size_bytes()));
      }
    }
  }
  weights.reset();

  std::vector<Profiler::Entry> entries;
  for (int i = 0; i < rp.instructions_size(); ++i) {
    const plan::Instruction &ins = rp.instructions(i);
    Step step;
    if (ins.has_copy()) {
      step.kind = StepKind::kCopy; // device addresses: Device::copy
      step.inputs.push_back(device_->arenaAt(rp.buffers(ins.copy().src()).offset()));
      step.outputs.push_back(device_->arenaAt(rp.buffers(ins.copy().dst()).offset()));
      step.copyBytes = rp.buffers(ins.copy().src()).size_bytes();
      step.category = "copy";
      step.name = "copy -> " + rp.buffers(ins.copy().dst()).name();
      entries.push_back({"copy", "", 0, 0});
    } else if (ins.has_collective()) {
      const plan::Collective &c = ins.collective();
      step.kind = StepKind::kCollective;
      // By plan::CollectiveKind (validated: ALL_REDUCE..RECV); the label names profile rows.
      static const struct {
        CommKind kind;
        const char *label;
      } kKinds[] = {{CommKind::kAllReduce, "AllReduce"},
                    {CommKind::kAllReduce, "AllReduce"},
                    {CommKind::kAllGather, "AllGather"},
                    {CommKind::kReduceScatter, "ReduceScatter"},
                    {CommKind::kBroadcast, "Broadcast"},
                    {CommKind::kSend, "Send"},
                    {CommKind::kRecv, "Recv"}};
      step.commKind = kKinds[c.kind()].kind;
      // Validation checked that this rank has a group on the axis and that the peer is in it.
      const int group = groupOfAxis.count(c.group()) ? groupOfAxis.at(c.group()) : -1;
      if (group < 0)
        return Status::error(rankWhere + ": instruction " + std::to_string(i),
                             "the rank has no " + c.group() + " group");
      step.group = group + 1;
      if (c.kind() == plan::COLLECTIVE_SEND || c.kind() == plan::COLLECTIVE_RECV ||
          c.kind() == plan::COLLECTIVE_BROADCAST)
        step.peer = plan_.groups(group).ranks(c.peer());
      step.tag = static_cast<int>(c.tag());
      step.persistent = c.group() == "dp" && step.commKind != CommKind::kSend &&
                        step.commKind != CommKind::kRecv;
      step.category = commKindName(step.commKind);
      for (int j = 0; j < c.inputs_size(); ++j) {
        step.inputs.push_back(device_->arenaAt(rp.buffers(c.inputs(j)).offset()));
        step.operandBytes.push_back(rp.buffers(c.inputs(j)).size_bytes());
      }
      for (int j = 0; j < c.outputs_size(); ++j) {
        step.outputs.push_back(device_->arenaAt(rp.buffers(c.outputs(j)).offset()));
        if (c.inputs_size() == 0) // recv: the size it receives
          step.operandBytes.push_back(rp.buffers(c.outputs(j)).size_bytes());
      }
      // A reduce-scatter's operand size is its block, this rank's share (CommRequest).
      if (c.kind() == plan::COLLECTIVE_REDUCE_SCATTER && c.outputs_size() == 1)
        step.operandBytes.assign(1, rp.buffers(c.outputs(0)).size_bytes());
      const int typed = c.inputs_size() > 0 ? c.inputs(0) : c.outputs(0);
      step.dtype = rp.buffers(typed).dtype();
      step.op = c.op() == plan::REDUCE_MEAN  ? ReduceOp::kMean
                : c.op() == plan::REDUCE_MAX ? ReduceOp::kMax
                                             : ReduceOp::kSum;
      step.name = c.name();
      entries.push_back({std::string(kKinds[c.kind()].label) + "(launch)", c.name(), 0, 0});
    } else if (ins.has_wait()) {
      step.kind = StepKind::kWait;
      step.collective = ins.wait().collective();
      step.name = rp.instructions(step.collective).collective().name();
      step.category = "wait";
      const std::string launch = entries[static_cast<size_t>(step.collective)].op;
      entries.push_back({launch.substr(0, launch.find('(')) + "(wait)", step.name, 0, 0});
    } else {
      const plan::KernelCall &call = ins.kernel();
      DTC_ASSIGN_OR_RETURN(ops::KernelSpec spec,
                           kernelSpecOf(rp, call, plan_.mode() == plan::MODE_INFERENCE));
      auto kernel = device_->createKernel(spec);
      if (!kernel)
        return kernel.status().withContext(rankWhere + ": instruction " + std::to_string(i));
      step.kernel = kernel.takeValue();
      for (int32_t b : call.inputs())
        step.inputs.push_back(b < 0 ? nullptr : device_->arenaAt(rp.buffers(b).offset()));
      for (int32_t b : call.outputs())
        step.outputs.push_back(b < 0 ? nullptr : device_->arenaAt(rp.buffers(b).offset()));
      step.name = call.node();
      step.category = call.op();
      entries.push_back({call.op(), call.node(), 0, 0});
    }
    steps_.push_back(std::move(step));
  }
  // The CUDA device allocates the kernels' shared workspace now that all of them said how much
  // they need.
  DTC_RETURN_IF_ERROR(device_->prepare().withContext(rankWhere));
  profiler_.reset(std::move(entries));
  inputSet_.assign(rp.inputs_size(), false);
  inFlight_.assign(steps_.size(), 0);
  launched_.assign(steps_.size(), false);
  return Status::ok();
}

Status Executor::setInput(const HostArray &array) {
  const plan::RankProgram &rp = program();
  for (int i = 0; i < rp.inputs_size(); ++i) {
    if (rp.inputs(i).name() != array.name)
      continue;
    const plan::Buffer &buf = rp.buffers(rp.inputs(i).buffer());
    std::vector<int64_t> shape = shapeOf(buf);
    if (static_cast<int32_t>(array.dtype) != buf.dtype() || array.shape != shape)
      return Status::error(
          "input '" + array.name + "'",
          "got " + typeStr(array.dtype, array.shape) + ", the plan expects " +
              typeStr(static_cast<ir::DType>(buf.dtype()), shape) +
              (array.shape.size() == shape.size() && !shape.empty() && array.shape[0] != shape[0]
                   ? " (the batch size is fixed when the plan is compiled: "
                     "recompile with --batch-size " +
                         std::to_string(array.shape[0]) + ")"
                   : ""));
    if (array.bytes.size() != buf.size_bytes())
      return Status::error("input '" + array.name + "'", "data size does not match its shape");
    DTC_RETURN_IF_ERROR(device_->upload(buf.offset(), array.bytes.data(), buf.size_bytes()));
    inputSet_[i] = true;
    return Status::ok();
  }
  std::string expected;
  for (const plan::Binding &b : rp.inputs())
    expected += (expected.empty() ? "" : ", ") + b.name() + " " +
                typeStr(static_cast<ir::DType>(rp.buffers(b.buffer()).dtype()),
                        shapeOf(rp.buffers(b.buffer())));
  return Status::error("input '" + array.name + "'",
                       "the plan has no input of that name (expected: " +
                           (expected.empty() ? std::string("none") : expected) + ")");
}

Status Executor::run(int begin, int end) {
  const plan::RankProgram &rp = program();
  if (begin < 0 || end < begin || end > numInstructions())
    return Status::error("rank " + std::to_string(opts_.rank),
                         "instruction range [" + std::to_string(begin) + ", " +
                             std::to_string(end) + ") is outside [0, " +
                             std::to_string(numInstructions()) + "]");
  for (int i = 0; i < rp.inputs_size(); ++i)
    if (!inputSet_[i]) {
      const plan::Buffer &buf = rp.buffers(rp.inputs(i).buffer());
      return Status::error("input '" + rp.inputs(i).name() + "'",
                           "not given (expected " +
                               typeStr(static_cast<ir::DType>(buf.dtype()), shapeOf(buf)) + ")");
    }
  using Clock = std::chrono::steady_clock;
  for (size_t i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i) {
    Clock::time_point t0;
    const bool timed = opts_.profile || opts_.tracer;
    int64_t traceBegin = 0;
    if (timed) {
      t0 = Clock::now();
      if (opts_.tracer)
        traceBegin = opts_.tracer->nowUs();
    }
    DTC_RETURN_IF_ERROR(runStep(i));
    if (timed) {
      // Synchronizing after every instruction also names the one whose asynchronous (GPU)
      // work failed.
      if (Status st = device_->synchronize(); !st.isOk())
        return st.withContext("rank " + std::to_string(opts_.rank) + ": instruction " +
                              std::to_string(i) + " (" + steps_[i].category + " '" +
                              steps_[i].name + "')");
      if (opts_.profile)
        profiler_.add(i, std::chrono::duration<double>(Clock::now() - t0).count());
      if (opts_.tracer) {
        const Step &s = steps_[i];
        Tracer::Event e;
        e.name = s.kind == StepKind::kKernel || s.kind == StepKind::kCopy
                     ? s.name
                     : s.category + " " + s.name;
        e.category = s.category;
        e.thread = Tracer::kCompute;
        e.beginUs = traceBegin;
        e.durationUs = opts_.tracer->nowUs() - traceBegin;
        opts_.tracer->record(std::move(e));
      }
    }
  }
  // Plans wait for every collective inside the range that launched it (plan validation checks
  // that each one has a wait); a range that stops in between would leave one writing its
  // outputs while the caller reads them.
  for (size_t i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i)
    if (launched_[i]) {
      Status drained = waitAllCollectives(); // nothing may write the arena after returning
      (void)drained;
      std::fill(launched_.begin(), launched_.end(), false);
      return Status::error("rank " + std::to_string(opts_.rank) + ": instruction " +
                               std::to_string(i) + " (all-reduce '" + steps_[i].name + "')",
                           "still in flight at the end of the instruction range [" +
                               std::to_string(begin) + ", " + std::to_string(end) +
                               "): its wait lies outside the range");
    }
  return device_->synchronize();
}

Status Executor::runStep(size_t i) {
  Step &s = steps_[i];
  auto where = [&] { return "rank " + std::to_string(opts_.rank) + ": instruction " +
                            std::to_string(i); };
  switch (s.kind) {
  case StepKind::kKernel: {
    ops::KernelArgs args{s.inputs.data(), s.inputs.size(), s.outputs.data(), s.outputs.size()};
    Status st = s.kernel->run(args);
    // A collective inside a kernel (synchronized BatchNorm) names the rank and node already.
    return st.isOk() || st.message().rfind("rank ", 0) == 0 ? st : st.withContext(where());
  }
  case StepKind::kCopy: {
    // The CPU device's copy is this memmove: inline, so the CPU loop makes no virtual call.
    if (hostArena_) {
      if (s.outputs[0] != s.inputs[0] && s.copyBytes)
        std::memmove(s.outputs[0], s.inputs[0], s.copyBytes);
      return Status::ok();
    }
    Status st = device_->copy(s.outputs[0], s.inputs[0], s.copyBytes);
    return st.isOk() ? st : st.withContext(where());
  }
  case StepKind::kCollective: {
    CommRequest r;
    r.kind = s.commKind;
    r.name = s.name;
    r.group = s.group;
    r.dtype = static_cast<ir::DType>(s.dtype);
    r.op = s.op;
    r.peer = s.peer;
    r.tag = s.tag;
    r.inputs = s.inputs;
    r.outputs = s.outputs;
    r.bytes = s.operandBytes;
    r.persistent = s.persistent;
    if (deviceComm_) {
      // Stream-ordered: the communicator's stream waits for the kernels enqueued so far.
      inFlight_[i] = deviceComm_->submit(std::move(r));
    } else {
      // Kernels before it must have written its inputs (the CPU stream is in order; this
      // returns at once).
      DTC_RETURN_IF_ERROR(device_->synchronize());
      inFlight_[i] = opts_.comm->submit(std::move(r));
    }
    launched_[i] = true;
    return Status::ok();
  }
  case StepKind::kWait: {
    const size_t c = static_cast<size_t>(s.collective);
    if (!launched_[c])
      return Status::error(where() + " (wait)", "the collective of instruction " +
                                                    std::to_string(c) + " was not launched");
    launched_[c] = false;
    // The communicator's errors name the rank and the collective already. On a GPU the wait
    // is stream-ordered: later kernels see the outputs, the host does not block.
    return deviceComm_ ? deviceComm_->wait(inFlight_[c]) : opts_.comm->wait(inFlight_[c]);
  }
  }
  return Status::error(where(), "unknown instruction kind");
}

Expected<std::vector<HostArray>> Executor::outputs() {
  const plan::RankProgram &rp = program();
  std::vector<HostArray> out;
  for (const plan::Binding &b : rp.outputs()) {
    const plan::Buffer &buf = rp.buffers(b.buffer());
    HostArray a;
    a.name = b.name();
    a.dtype = static_cast<ir::DType>(buf.dtype());
    a.shape = shapeOf(buf);
    a.bytes.resize(buf.size_bytes());
    DTC_RETURN_IF_ERROR(device_->download(buf.offset(), a.bytes.data(), buf.size_bytes()));
    out.push_back(std::move(a));
  }
  return out;
}

Expected<HostArray> Executor::output(const std::string &name) {
  const plan::RankProgram &rp = program();
  for (const plan::Binding &b : rp.outputs())
    if (b.name() == name) {
      DTC_ASSIGN_OR_RETURN(HostArray a, readBuffer(b.buffer()));
      a.name = name;
      return a;
    }
  return Status::error("output '" + name + "'", "the plan has no output of that name");
}

namespace {

/// Copies between the logical row-major order [d0, d1, d2..dk] and the channels-last order
/// [d0, d2..dk, d1] of a rank >= 3 tensor, `elem` bytes per element.
void permuteChannels(const std::vector<int64_t> &shape, size_t elem, const char *src, char *dst,
                     bool toChannelsLast) {
  const int64_t n = shape[0], c = shape[1];
  int64_t inner = 1;
  for (size_t i = 2; i < shape.size(); ++i)
    inner *= shape[i];
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t s = 0; s < inner; ++s) {
        const int64_t rowMajor = (b * c + ch) * inner + s;
        const int64_t last = (b * inner + s) * c + ch;
        const int64_t from = toChannelsLast ? rowMajor : last;
        const int64_t to = toChannelsLast ? last : rowMajor;
        std::memcpy(dst + to * elem, src + from * elem, elem);
      }
}

} // namespace

Expected<HostArray> Executor::readBuffer(int index) {
  const plan::RankProgram &rp = program();
  if (index < 0 || index >= rp.buffers_size())
    return Status::error("rank " + std::to_string(opts_.rank),
                         "buffer index " + std::to_string(index) + " is out of range");
  const plan::Buffer &buf = rp.buffers(index);
  HostArray a;
  a.name = buf.name();
  a.dtype = static_cast<ir::DType>(buf.dtype());
  a.shape = shapeOf(buf);
  a.bytes.resize(buf.size_bytes());
  DTC_RETURN_IF_ERROR(device_->download(buf.offset(), a.bytes.data(), buf.size_bytes()));
  if (buf.layout() == plan::LAYOUT_CHANNELS_LAST && a.shape.size() >= 3 && !a.bytes.empty()) {
    std::string rowMajor(a.bytes.size(), '\0');
    permuteChannels(a.shape, ir::dtypeSize(a.dtype), a.bytes.data(), rowMajor.data(), false);
    a.bytes = std::move(rowMajor);
  }
  return a;
}

Status Executor::writeBuffer(int index, const HostArray &array) {
  const plan::RankProgram &rp = program();
  if (index < 0 || index >= rp.buffers_size())
    return Status::error("rank " + std::to_string(opts_.rank),
                         "buffer index " + std::to_string(index) + " is out of range");
  const plan::Buffer &buf = rp.buffers(index);
  std::vector<int64_t> shape = shapeOf(buf);
  if (static_cast<int32_t>(array.dtype) != buf.dtype() || array.shape != shape)
    return Status::error("buffer '" + buf.name() + "'",
                         "got " + typeStr(array.dtype, array.shape) + ", the plan has " +
                             typeStr(static_cast<ir::DType>(buf.dtype()), shape));
  if (array.bytes.size() != buf.size_bytes())
    return Status::error("buffer '" + buf.name() + "'", "data size does not match its shape");
  if (buf.layout() == plan::LAYOUT_CHANNELS_LAST && shape.size() >= 3 && !array.bytes.empty()) {
    std::string physical(array.bytes.size(), '\0');
    permuteChannels(shape, ir::dtypeSize(array.dtype), array.bytes.data(), physical.data(), true);
    return device_->upload(buf.offset(), physical.data(), buf.size_bytes());
  }
  return device_->upload(buf.offset(), array.bytes.data(), buf.size_bytes());
}

} // namespace dtc::rt
