// The training loop (see Trainer.h).
#include "runtime/Trainer.h"
#include "runtime/PlanUtil.h"
#include "runtime/TrainerInternal.h"

#include "compiler/ir/Training.h"
#include "compiler/support/FileIO.h"
#include "ops/cpu/Kernel.h"
#include "runtime/Checkpoint.h"
#include "runtime/DataLoader.h"
#include "runtime/Executor.h"
#include "runtime/ExportModel.h"
#include "runtime/LrSchedule.h"
#include "runtime/Trace.h"
#include "runtime/comm/Communicator.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

namespace dtc::rt {

namespace {

/// The value of a scalar f32 or f64 output (the loss).
Expected<double> scalarOf(const HostArray &a) {
  if (a.numElements() != 1)
    return Status::error("output '" + a.name + "'",
                         "the loss must be a scalar, got " + typeStr(a.dtype, a.shape));
  if (a.dtype == ir::DType::kFloat32) {
    float v;
    std::memcpy(&v, a.bytes.data(), 4);
    return static_cast<double>(v);
  }
  if (a.dtype == ir::DType::kFloat64) {
    double v;
    std::memcpy(&v, a.bytes.data(), 8);
    return v;
  }
  return Status::error("output '" + a.name + "'",
                       "the loss must be f32 or f64, got " + typeStr(a.dtype, a.shape));
}

HostArray scalarArray(const std::string &name, ir::DType dtype, std::vector<int64_t> shape,
                      const void *data, size_t bytes) {
  HostArray a;
  a.name = name;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.bytes.assign(static_cast<const char *>(data), bytes);
  return a;
}

/// An output file's folder must exist before training starts (no training run lost to a typo).
Status checkOutputPath(const std::string &flag, const std::string &path) {
  if (path.empty())
    return Status::ok();
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status::error(flag + " " + path, "is a directory");
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    return Status::error(flag + " " + path, "folder " + parent.string() + " does not exist");
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    return Status::error(flag + " " + path, "exists and is not a regular file");
  return Status::ok();
}

std::string fmtRate(double samplesPerS) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", samplesPerS);
  return buf;
}
} // namespace

namespace detail {

/// The layout of the program rank `rank` runs.
TrainingLayout layoutOf(const plan::Plan &plan, int rank) {
  const plan::RankProgram &rp = plan::programOf(plan, rank);
  const plan::Training &tr = rp.training();
  TrainingLayout l;
  l.lossBuffer = tr.loss_output().empty() ? -1 : findBinding(rp.outputs(), tr.loss_output());
  l.predictionName = tr.prediction_output();
  l.labelName = tr.label_input();
  l.optimizerBegin = tr.optimizer_begin();
  l.forwardEnd = tr.forward_end() > 0 ? tr.forward_end() : tr.optimizer_begin();
  l.microBatches = std::max<int64_t>(1, plan.hyperparameters().grad_accum_steps());
  std::set<int> persistent;
  for (int b = 0; b < rp.buffers_size(); ++b)
    if (rp.buffers(b).kind() == plan::BUFFER_PARAMETER ||
        rp.buffers(b).kind() == plan::BUFFER_OPTIMIZER_STATE)
      persistent.insert(b);
  for (int32_t b : tr.state_buffers())
    persistent.insert(b);
  l.persistent.assign(persistent.begin(), persistent.end());
  for (int b : l.persistent) {
    const plan::Buffer &pb = rp.buffers(b);
    bool written = false;
    // (Another rank's program, read as a summary, has no instructions: its layout serves
    // gather(), which reads its initializers and gradients only.)
    for (int i = 0; i < std::min(l.optimizerBegin, rp.instructions_size()) && !written; ++i) {
      const plan::Instruction &ins = rp.instructions(i);
      std::vector<int32_t> outs;
      if (ins.has_copy())
        outs.push_back(ins.copy().dst());
      else if (ins.has_collective())
        outs.assign(ins.collective().outputs().begin(), ins.collective().outputs().end());
      else if (ins.has_kernel())
        outs.assign(ins.kernel().outputs().begin(), ins.kernel().outputs().end());
      for (int32_t o : outs) {
        if (o < 0)
          continue;
        const plan::Buffer &ob = rp.buffers(o);
        if (ob.size_bytes() && pb.size_bytes() && ob.offset() < pb.offset() + pb.size_bytes() &&
            pb.offset() < ob.offset() + ob.size_bytes())
          written = true;
      }
    }
    if (written)
      l.writtenByForward.push_back(b);
  }
  for (const plan::TrainedParameter &p : tr.parameters())
    if (p.gradient() >= 0)
      l.gradients.push_back({p.gradient(), p.name()});
  std::set<std::string> seen;
  auto addInit = [&](int b) {
    const plan::Buffer &buf = rp.buffers(b);
    if (!buf.source().empty() && buf.kind() != plan::BUFFER_GRADIENT &&
        seen.insert(buf.source()).second)
      l.initializers.push_back({b, buf.source()});
  };
  for (int b = 0; b < rp.buffers_size(); ++b)
    if (rp.buffers(b).kind() == plan::BUFFER_PARAMETER)
      addInit(b);
  for (int32_t b : tr.state_buffers())
    addInit(b);
  return l;
}

Status Trainer::setScalars(int64_t step, int64_t rngCounter, double lr) {
  const plan::Training &tr = program_.training();
  if (!tr.lr_input().empty()) {
    float v = static_cast<float>(lr);
    DTC_RETURN_IF_ERROR(ex_.setInput(scalarArray(tr.lr_input(), ir::DType::kFloat32, {}, &v, 4)));
  }
  if (!tr.step_input().empty())
    DTC_RETURN_IF_ERROR(
        ex_.setInput(scalarArray(tr.step_input(), ir::DType::kInt64, {}, &step, 8)));
  if (!tr.tp_rank_input().empty()) {
    const int64_t tp = plan_.ranks(rank_).tp();
    DTC_RETURN_IF_ERROR(
        ex_.setInput(scalarArray(tr.tp_rank_input(), ir::DType::kInt64, {}, &tp, 8)));
  }
  if (!tr.dp_rank_input().empty()) {
    const int64_t dp = plan_.ranks(rank_).dp();
    DTC_RETURN_IF_ERROR(
        ex_.setInput(scalarArray(tr.dp_rank_input(), ir::DType::kInt64, {}, &dp, 8)));
  }
  if (!tr.rng_input().empty()) {
    // Tensor-parallel peers compute the same replicated values: they share one key (the rank
    // of their group's first member), so their dropout masks agree.
    const int64_t keyRank = rank_ - plan_.ranks(rank_).tp();
    int64_t key[3] = {static_cast<int64_t>(seed_), rngCounter, keyRank};
    DTC_RETURN_IF_ERROR(
        ex_.setInput(scalarArray(tr.rng_input(), ir::DType::kInt64, {3}, key, sizeof key)));
  }
  return Status::ok();
}

Status Trainer::microBatch(const Dataset &data, const std::vector<int64_t> &order, int64_t first,
                           double &loss, Totals &totals, int end) {
  std::vector<HostArray> batch = data.batch(order, first);
  for (const HostArray &a : batch) {
    if (!fed_.count(a.name))
      continue; // another pipeline stage's input
    Status s = ex_.setInput(a);
    if (!s.isOk())
      return s.withContext(data.path());
  }
  DTC_RETURN_IF_ERROR(ex_.run(0, end >= 0 ? end : l_.optimizerBegin));
  loss = 0; // a pipeline stage before the last computes no loss (summed over the ranks below)
  if (!program_.training().loss_output().empty()) {
    DTC_ASSIGN_OR_RETURN(HostArray lossArray, ex_.output(program_.training().loss_output()));
    DTC_ASSIGN_OR_RETURN(loss, scalarOf(lossArray));
  }
  if (!l_.predictionName.empty() && !l_.labelName.empty()) {
    DTC_ASSIGN_OR_RETURN(HostArray pred, ex_.output(l_.predictionName));
    for (const HostArray &a : batch)
      if (a.name == l_.labelName)
        countCorrect(pred, a, program_.training().ignore_index(), totals.correct,
                     totals.counted);
  }
  return Status::ok();
}

Status Trainer::logLine(const nlohmann::json &j) {
  return log_.isOpen() ? log_.write(j.dump() + "\n") : Status::ok();
}

Status Trainer::validate(int64_t step, Totals &val) {
  // Run the forward part of the plan (loss and prediction; without forward_end, from older
  // plans, the whole micro-batch part) and put back any persistent buffer it writes
  // (BatchNormalization's running statistics).
  std::vector<HostArray> saved;
  for (int b : l_.writtenByForward) {
    DTC_ASSIGN_OR_RETURN(HostArray a, ex_.readBuffer(b));
    saved.push_back(std::move(a));
  }
  std::vector<int64_t> order = epochOrder(val_->samples(), 0, 0, false);
  // Every rank evaluates its slice of each global batch; the sums are combined below.
  const int64_t batches = val_->samples() / globalBatch_;
  auto t0 = Clock::now();
  // Parameter-server workers have no communicator: the worker evaluates every slice itself.
  const bool alone = opts_.parameters && !comm_;
  for (int64_t i = 0; i < batches; ++i) {
    for (int slice = alone ? 0 : dpIndex_; slice < (alone ? dpSize_ : dpIndex_ + 1); ++slice) {
      DTC_RETURN_IF_ERROR(setScalars(step, step * l_.microBatches, 0.0));
      double loss = 0;
      DTC_RETURN_IF_ERROR(
          microBatch(*val_, order, i * globalBatch_ + slice * l_.batch, loss, val, l_.forwardEnd));
      val.lossSum += loss;
      val.samples += l_.batch;
    }
    val.steps += 1;
  }
  val.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> sums = {val.lossSum, static_cast<double>(val.correct),
                              static_cast<double>(val.counted), static_cast<double>(val.samples)};
  DTC_RETURN_IF_ERROR(sumOverRanks(sums, "validation metrics"));
  val.lossSum = sums[0] / (alone ? dpSize_ : lossRanks_);
  val.correct = static_cast<int64_t>(sums[1]);
  val.counted = static_cast<int64_t>(sums[2]);
  val.samples = static_cast<int64_t>(sums[3]);
  for (size_t k = 0; k < saved.size(); ++k)
    DTC_RETURN_IF_ERROR(ex_.writeBuffer(l_.writtenByForward[k], saved[k]));
  return Status::ok();
}

Status Trainer::epochEnd(int64_t epoch, int64_t stepsDone, Totals &t, bool partial) {
  nlohmann::json j;
  j["event"] = "epoch";
  j["epoch"] = epoch;
  j["step"] = stepsDone;
  if (partial)
    j["partial"] = true;
  j["train_loss"] = t.steps ? t.lossSum / t.steps : NAN;
  if (t.counted)
    j["train_accuracy"] = static_cast<double>(t.correct) / t.counted;
  if (t.seconds > 0)
    j["samples_per_s"] = t.samples / t.seconds;
  if (reportsSkipped_)
    j["skipped_steps"] = t.skipped;
  std::string text = "epoch " + std::to_string(epoch + 1) + (partial ? " (partial)" : "") +
                     ": train loss " + std::to_string(t.steps ? t.lossSum / t.steps : NAN);
  if (t.counted)
    text += " accuracy " + std::to_string(static_cast<double>(t.correct) / t.counted);
  if (val_) {
    Totals v;
    DTC_RETURN_IF_ERROR(validate(stepsDone, v));
    j["val_loss"] = v.lossSum / v.steps;
    text += ", val loss " + std::to_string(v.lossSum / v.steps);
    if (v.counted) {
      j["val_accuracy"] = static_cast<double>(v.correct) / v.counted;
      text += " accuracy " + std::to_string(static_cast<double>(v.correct) / v.counted);
    }
  }
  text += ", " + fmtRate(t.seconds > 0 ? t.samples / t.seconds : 0) + " samples/s";
  if (reportsSkipped_ && t.skipped > 0)
    text += ", " + std::to_string(t.skipped) + " step" + (t.skipped == 1 ? "" : "s") +
            " skipped (non-finite gradients; loss scaling)";
  DTC_RETURN_IF_ERROR(logLine(j));
  if (opts_.progress) {
    if (progressLineOpen_)
      std::fputc('\n', opts_.progress);
    progressLineOpen_ = false;
    std::fprintf(opts_.progress, "%s\n", text.c_str());
    std::fflush(opts_.progress);
  }
  t = Totals();
  return Status::ok();
}

Status Trainer::run() {
  fingerprint_ = opts_.planFingerprint.empty() ? plan::fingerprint(plan_) : opts_.planFingerprint;
  seed_ = opts_.seed.value_or(0);
  shuffle_ = opts_.shuffle.value_or(true);
  comm_ = opts_.comm;
  rank_ = comm_ ? comm_->rank() : opts_.parameters ? opts_.workerRank : 0;
  world_ = plan_.world_size();
  pipeline_ = plan_.mesh().pp() > 1;
  dpIndex_ = static_cast<int>(plan_.ranks(rank_).dp());
  dpSize_ = static_cast<int>(std::max<int64_t>(1, plan_.mesh().dp()));
  if (!pipeline_ && plan_.mesh().dp() < 1) { // plans without a mesh: every rank is a replica
    dpIndex_ = rank_;
    dpSize_ = world_;
  }
  lossRanks_ = 0;
  for (const plan::RankInfo &ri : plan_.ranks())
    lossRanks_ += !plan_.programs(ri.program()).training().loss_output().empty();
  lossRanks_ = std::max(lossRanks_, 1); // validated: the last stage's ranks compute the loss
  globalBatch_ = l_.batch * dpSize_;
  const int64_t perStep = globalBatch_ * l_.microBatches;
  const std::string batchText =
      dpSize_ > 1 ? "global batch " + std::to_string(globalBatch_) + " (" +
                        std::to_string(dpSize_) + " replicas x " + std::to_string(l_.batch) + ")"
                  : "batch " + std::to_string(l_.batch);
  stepsPerEpoch_ = train_.samples() / perStep;
  if (stepsPerEpoch_ < 1)
    return Status::error(train_.path(), "has " + std::to_string(train_.samples()) +
                                            " samples, fewer than one step takes (" + batchText +
                                            " x " + std::to_string(l_.microBatches) +
                                            " micro-batches)");
  if (val_ && val_->samples() < globalBatch_)
    return Status::error(val_->path(), "has " + std::to_string(val_->samples()) +
                                           " samples, fewer than one " + batchText);
  totalSteps_ =
      opts_.steps > 0 ? opts_.steps : stepsPerEpoch_ * (opts_.epochs > 0 ? opts_.epochs : 1);
  DTC_ASSIGN_OR_RETURN(LrSchedule schedule,
                       LrSchedule::create(plan_.hyperparameters(), totalSteps_));
  if (comm_ && world_ > 1)
    DTC_RETURN_IF_ERROR(checkSameRun());

  int64_t step = 0;
  Totals epochTotals;
  DTC_RETURN_IF_ERROR(start(step, epochTotals));
  reportsSkipped_ = findBinding(program_.outputs(), ir::kSkippedStepsOutput) >= 0;
  reportsScale_ = findBinding(program_.outputs(), ir::kLossScaleOutput) >= 0;
  skippedSoFar_ = 0;
  // The count so far is optimizer state: a resumed run starts from the checkpoint's.
  const std::string countState = std::string(ir::kSkippedStepsOutput) + ".count";
  for (int b = 0; reportsSkipped_ && b < program_.buffers_size(); ++b)
    if (program_.buffers(b).name() == countState) {
      DTC_ASSIGN_OR_RETURN(HostArray a, ex_.readBuffer(b));
      DTC_ASSIGN_OR_RETURN(skippedSoFar_, scalarOf(a));
    }
  // Parameter servers: a (re)joining worker continues where the servers say.
  if (opts_.parameters) {
    DTC_ASSIGN_OR_RETURN(step, opts_.parameters->join());
    if (step >= totalSteps_)
      return Status::error("worker " + std::to_string(rank_),
                           "the servers are at step " + std::to_string(step) + ", at or past the " +
                               std::to_string(totalSteps_) +
                               " steps of this run: nothing to train (an old --checkpoint-dir "
                               "of the servers?)");
  }
  const plan::RankProgram &rp = program_;
  std::vector<std::vector<float>> accum;
  if (l_.microBatches > 1)
    for (auto &[b, name] : l_.gradients) {
      if (rp.buffers(b).dtype() != static_cast<int32_t>(ir::DType::kFloat32))
        return Status::error("gradient of '" + name + "'",
                             "gradient accumulation supports f32 gradients only");
      accum.emplace_back(rp.buffers(b).size_bytes() / 4);
    }

  std::vector<int64_t> order;
  int64_t orderEpoch = -1;
  int64_t epoch = step / stepsPerEpoch_;
  int64_t stepsRun = 0;
  auto lastPrint = Clock::now() - std::chrono::seconds(1);
  while (step < totalSteps_) {
    epoch = step / stepsPerEpoch_;
    const int64_t inEpoch = step % stepsPerEpoch_;
    if (orderEpoch != epoch) {
      order = epochOrder(train_.samples(), seed_, epoch, shuffle_);
      orderEpoch = epoch;
    }
    auto t0 = Clock::now();
    const int64_t traceBegin = opts_.tracer ? opts_.tracer->nowUs() : 0;
    const double lr = schedule.lr(step);
    double stepLoss = 0;
    const int64_t correct0 = epochTotals.correct, counted0 = epochTotals.counted;
    if (opts_.parameters)
      DTC_RETURN_IF_ERROR(opts_.parameters->pull(step, ex_));
    for (int64_t m = 0; m < l_.microBatches; ++m) {
      DTC_RETURN_IF_ERROR(setScalars(step, step * l_.microBatches + m, lr));
      double loss = 0;
      DTC_RETURN_IF_ERROR(microBatch(train_, order,
                                     (inEpoch * l_.microBatches + m) * globalBatch_ +
                                         dpIndex_ * l_.batch,
                                     loss, epochTotals));
      stepLoss += loss;
      if (l_.microBatches > 1)
        for (size_t g = 0; g < l_.gradients.size(); ++g) {
          DTC_ASSIGN_OR_RETURN(HostArray a, ex_.readBuffer(l_.gradients[g].first));
          const float *src = reinterpret_cast<const float *>(a.bytes.data());
          for (size_t i = 0; i < accum[g].size(); ++i)
            accum[g][i] = m ? accum[g][i] + src[i] : src[i];
        }
    }
    stepLoss /= static_cast<double>(l_.microBatches);
    if (l_.microBatches > 1)
      for (size_t g = 0; g < l_.gradients.size(); ++g) {
        DTC_ASSIGN_OR_RETURN(HostArray a, ex_.readBuffer(l_.gradients[g].first));
        float *dst = reinterpret_cast<float *>(a.bytes.data());
        const float k = static_cast<float>(l_.microBatches);
        for (size_t i = 0; i < accum[g].size(); ++i)
          dst[i] = accum[g][i] / k;
        DTC_RETURN_IF_ERROR(ex_.writeBuffer(l_.gradients[g].first, a));
      }
    const bool tensorParallel = plan_.mesh().tp() > 1;
    if (!opts_.dumpGradientsPath.empty() && step + 1 == totalSteps_ &&
        (pipeline_ || tensorParallel)) {
      // Each stage's gradients are the step's (the pipeline sums its micro-batches, and the
      // data-parallel groups all-reduce them); tensor-parallel ranks hold shards: rank 0
      // collects them into whole tensors.
      if (l_.microBatches > 1 && (dpSize_ > 1 || (tensorParallel && !pipeline_)))
        return Status::error("--dump-gradients",
                             "is not supported for pipelines with data parallelism, or tensor "
                             "parallelism, with --grad-accum-steps > 1");
      DTC_RETURN_IF_ERROR(gather(Part::kGradients, lastGradients_));
    } else if (!opts_.dumpGradientsPath.empty() && step + 1 == totalSteps_) {
      for (auto &[b, name] : l_.gradients) {
        DTC_ASSIGN_OR_RETURN(HostArray a, ex_.readBuffer(b));
        a.name = name;
        // With accumulation the plan all-reduces the accumulated sums in the optimizer part;
        // the micro-batch gradients averaged above are this rank's: average them over the
        // ranks too (every rank takes part).
        if (comm_ && world_ > 1 && l_.microBatches > 1)
          DTC_RETURN_IF_ERROR(comm_->allReduce(a.bytes.data(), a.bytes.size() / 4,
                                               ir::DType::kFloat32, ReduceOp::kMean,
                                               "gradient of '" + name + "' for --dump-gradients"));
        if (rank_ == 0)
          lastGradients_.push_back(std::move(a));
      }
    }
    // Data parallelism: the step's loss is the mean over the global batch (the mean of the
    // ranks' means), and accuracy counts every rank's predictions, so that all ranks keep the
    // same totals. The sums are all-reduced while the optimizer part runs.
    std::vector<double> sums = {stepLoss, static_cast<double>(epochTotals.correct - correct0),
                                static_cast<double>(epochTotals.counted - counted0)};
    uint64_t sumsHandle = 0;
    if (comm_ && world_ > 1) {
      AllReduceRequest r;
      r.name = "step loss and accuracy";
      r.dtype = ir::DType::kFloat64;
      r.op = ReduceOp::kSum;
      r.inputs = {sums.data()};
      r.outputs = {sums.data()};
      r.bytes = {sums.size() * sizeof(double)};
      sumsHandle = comm_->allReduceAsync(std::move(r));
    }
    // Parameter servers apply the update (the workers' program has no optimizer part). A
    // non-finite loss is not pushed (it would poison every worker's parameters): the check
    // below reports it.
    int64_t nextStep = step + 1;
    Status optimized = Status::ok();
    if (opts_.parameters) {
      if (std::isfinite(stepLoss) || opts_.allowNonFiniteLoss) {
        Expected<int64_t> next = opts_.parameters->push(step, lr, ex_);
        optimized = next.status();
        if (next)
          nextStep = std::min(*next, totalSteps_);
      }
    } else {
      optimized = ex_.run(l_.optimizerBegin, ex_.numInstructions());
    }
    // The metrics' all-reduce writes into `sums`: wait for it before anything returns.
    Status summed = sumsHandle ? comm_->wait(sumsHandle) : Status::ok();
    DTC_RETURN_IF_ERROR(optimized);
    DTC_RETURN_IF_ERROR(summed);
    // Loss scaling: the plan counts the steps it skipped (non-finite gradients; every rank
    // decides alike on the all-reduced gradients) and halves or doubles its scale.
    nlohmann::json ampFields = nlohmann::json::object();
    std::string ampText;
    if (reportsSkipped_) {
      DTC_ASSIGN_OR_RETURN(HostArray a, ex_.output(ir::kSkippedStepsOutput));
      DTC_ASSIGN_OR_RETURN(double count, scalarOf(a));
      const bool skipped = count > skippedSoFar_;
      skippedSoFar_ = count;
      epochTotals.skipped += skipped ? 1 : 0;
      ampFields["skipped"] = skipped;
      ampFields["skipped_steps"] = static_cast<int64_t>(count);
      if (skipped)
        ampText = " (step skipped: non-finite gradients)";
      if (reportsScale_) {
        DTC_ASSIGN_OR_RETURN(HostArray sa, ex_.output(ir::kLossScaleOutput));
        DTC_ASSIGN_OR_RETURN(double scale, scalarOf(sa));
        ampFields["loss_scale"] = scale;
        char buf[64];
        std::snprintf(buf, sizeof buf, " loss scale %g", scale);
        ampText += buf;
      }
    }
    if (sumsHandle) {
      stepLoss = sums[0] / lossRanks_;
      epochTotals.correct = correct0 + static_cast<int64_t>(sums[1]);
      epochTotals.counted = counted0 + static_cast<int64_t>(sums[2]);
    }
    // Every rank has the same (all-reduced) loss, so every rank stops here alike.
    if (!std::isfinite(stepLoss) && !opts_.allowNonFiniteLoss) {
      // NaN or infinity in the data reaches the loss too (NaN propagates through every
      // kernel): blame the data when it holds one, the learning rate otherwise.
      const std::string bad = train_.nonFiniteArray();
      const std::string cause =
          bad.empty() ? "training diverged (try a smaller --lr, or --clip-grad-norm when "
                        "compiling)"
                      : "the training data hold NaN or infinite values (array '" + bad + "' of " +
                            train_.path() + "), which reach the loss; clean the data";
      return Status::error(
          "step " + std::to_string(step + 1),
          std::string("the loss is ") + (std::isnan(stepLoss) ? "NaN" : "infinite") + ": " + cause +
              "; nothing of this step is logged, checkpointed or exported" +
              (opts_.checkpointDir.empty()
                   ? ""
                   : " (the checkpoints in " + opts_.checkpointDir + " are from earlier steps)") +
              "; dtc-run --allow-nonfinite-loss goes on");
    }
    // --step-delay stands in for compute: it counts in the step's time.
    if (opts_.stepDelaySeconds > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(opts_.stepDelaySeconds));
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const double rate = seconds > 0 ? perStep / seconds : 0;
    if (opts_.tracer) {
      Tracer::Event e;
      e.name = "step " + std::to_string(step);
      e.category = "step";
      e.thread = Tracer::kHost;
      e.beginUs = traceBegin;
      e.durationUs = opts_.tracer->nowUs() - traceBegin;
      opts_.tracer->record(std::move(e));
    }
    epochTotals.lossSum += stepLoss;
    epochTotals.steps += 1;
    epochTotals.seconds += seconds;
    epochTotals.samples += perStep;
    nlohmann::json stepLine = {{"event", "step"},  {"step", step}, {"epoch", epoch},
                               {"loss", stepLoss}, {"lr", lr},     {"samples_per_s", rate}};
    stepLine.update(ampFields);
    DTC_RETURN_IF_ERROR(logLine(stepLine));
    step = std::max(step + 1, nextStep);
    ++stepsRun;
    if (opts_.progress) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "epoch %lld step %lld/%lld (%lld/%lld): loss %.6g lr %.4g %.1f samples/s",
                    static_cast<long long>(epoch + 1), static_cast<long long>(inEpoch + 1),
                    static_cast<long long>(stepsPerEpoch_), static_cast<long long>(step),
                    static_cast<long long>(totalSteps_), stepLoss, lr, rate);
      if (!ampText.empty())
        std::snprintf(line + std::strlen(line), sizeof line - std::strlen(line), "%s",
                      ampText.c_str());
      if (opts_.progressIsTerminal) {
        if (Clock::now() - lastPrint > std::chrono::milliseconds(100) || step == totalSteps_) {
          std::fprintf(opts_.progress, "\r%s\033[K", line);
          std::fflush(opts_.progress);
          progressLineOpen_ = true;
          lastPrint = Clock::now();
        }
      } else if (opts_.printEvery > 0 && step % opts_.printEvery == 0) {
        std::fprintf(opts_.progress, "%s\n", line);
        std::fflush(opts_.progress);
      }
    }
    const bool epochDone = inEpoch + 1 == stepsPerEpoch_;
    if (epochDone)
      DTC_RETURN_IF_ERROR(epochEnd(epoch, step, epochTotals, false));
    const bool due = opts_.checkpointEvery > 0 ? step % opts_.checkpointEvery == 0 : epochDone;
    if (!opts_.checkpointDir.empty() && (due || step == totalSteps_))
      DTC_RETURN_IF_ERROR(
          writeCheckpointAt(step, step / stepsPerEpoch_, step % stepsPerEpoch_, epochTotals));
  }
  // A run that stops inside an epoch still reports (and validates) what it did of it.
  if (stepsRun > 0 && step % stepsPerEpoch_ != 0)
    DTC_RETURN_IF_ERROR(epochEnd(epoch, step, epochTotals, true));
  if (progressLineOpen_ && opts_.progress)
    std::fputc('\n', opts_.progress);

  // Parameter servers: the outputs hold the servers' parameters after this worker's last step.
  if (opts_.parameters) {
    if (!opts_.saveParamsPath.empty() || !opts_.exportPath.empty())
      DTC_RETURN_IF_ERROR(opts_.parameters->pull(step, ex_));
    DTC_RETURN_IF_ERROR(opts_.parameters->finish());
  }
  // Pipelines: rank 0 collects every stage's parameters for --save-params and --export.
  std::vector<HostArray> params;
  if (!opts_.saveParamsPath.empty() || !opts_.exportPath.empty())
    DTC_RETURN_IF_ERROR(gather(Part::kInitializers, params));
  if (rank_ != 0)
    return Status::ok(); // rank 0 writes the outputs
  if (!opts_.dumpGradientsPath.empty()) {
    if (lastGradients_.empty() && !l_.gradients.empty())
      return Status::error("--dump-gradients " + opts_.dumpGradientsPath,
                           "no training step ran (the run already stood at step " +
                               std::to_string(step) + ")");
    DTC_RETURN_IF_ERROR(writeNpz(opts_.dumpGradientsPath, lastGradients_));
  }
  if (!opts_.saveParamsPath.empty() || !opts_.exportPath.empty()) {
    if (!opts_.saveParamsPath.empty())
      DTC_RETURN_IF_ERROR(writeNpz(opts_.saveParamsPath, params));
    if (!opts_.exportPath.empty()) {
      std::error_code ec;
      if (std::filesystem::equivalent(ex_.modelFile(), opts_.exportPath, ec))
        return Status::error("--export " + opts_.exportPath,
                             "is the plan's source model; the plan (and its checkpoints) would "
                             "no longer match it: export to another file");
      // The model is read again for its graph: it must still be the file the plan was made from
      // (replaced during training, it would export another graph with these weights).
      DTC_ASSIGN_OR_RETURN(const std::string checksum, plan::checksumFile(ex_.modelFile(), "the plan's model", kMaxModelFileBytes,
                                              plan_.model().checksum_algorithm()));
      if (checksum != plan_.model().checksum())
        return Status::error("--export " + opts_.exportPath,
                             ex_.modelFile() + " changed during training (it is no longer the "
                                               "model the plan was compiled against); nothing "
                                               "exported");
      DTC_RETURN_IF_ERROR(exportTrainedModel(ex_.modelFile(), params, opts_.exportPath,
                                             plan_.model().untie_initializers()));
    }
  }
  DTC_RETURN_IF_ERROR(log_.close());
  return Status::ok();
}

} // namespace detail

Status train(plan::Plan plan, const TrainOptions &opts) {
  // What the loop needs (range-checked on its own), then the whole structure (indices, sizes,
  // ranks) before anything else reads the plan; kernels are checked when the executor is made.
  DTC_RETURN_IF_ERROR(checkTrainingPlan(plan, opts.planPath));
  DTC_RETURN_IF_ERROR(plan::validatePlan(plan, opts.planPath));
  if (opts.epochs > 0 && opts.steps > 0)
    return Status::error("--epochs and --steps", "give one of them");
  if (opts.resume && opts.checkpointDir.empty())
    return Status::error("--resume", "needs --checkpoint-dir");
  // ZeRO stage 2: no rank keeps whole gradients after their bucket's reduce-scatter.
  if (plan.hyperparameters().zero() == 2 && !opts.dumpGradientsPath.empty())
    return Status::error("--dump-gradients", "no rank holds whole gradients under --zero 2 (each "
                                             "keeps its shard of every bucket)");
  // Rank 0 alone writes the outputs (on another host, their folders need not exist).
  if ((!opts.comm && (!opts.parameters || opts.workerRank == 0)) ||
      (opts.comm && opts.comm->rank() == 0)) {
    DTC_RETURN_IF_ERROR(checkOutputPath("--export", opts.exportPath));
    DTC_RETURN_IF_ERROR(checkOutputPath("--save-params", opts.saveParamsPath));
    DTC_RETURN_IF_ERROR(checkOutputPath("--dump-gradients", opts.dumpGradientsPath));
    DTC_RETURN_IF_ERROR(checkOutputPath("--log", opts.logPath));
    DTC_RETURN_IF_ERROR(checkOutputPath("--trace", opts.tracePath));
  }
  if (opts.resume && (!opts.comm || opts.comm->rank() == 0)) {
    // Fail before loading anything when there is nothing to resume.
    DTC_RETURN_IF_ERROR(newestCheckpoint(opts.checkpointDir).status());
  }

  // Data before weights, so that a bad dataset fails fast.
  // Every rank loads every data array (they check that they read the same data); a pipeline
  // stage feeds only those its program binds.
  std::vector<DataInput> inputs;
  for (int p = 0; p < plan.programs_size(); ++p) {
    if (plan.programs(p).ranks_size() == 0)
      continue;
    DTC_ASSIGN_OR_RETURN(std::vector<DataInput> part,
                         dataInputsOf(plan, plan.programs(p).ranks(0)));
    for (DataInput &in : part)
      if (std::none_of(inputs.begin(), inputs.end(),
                       [&](const DataInput &d) { return d.input == in.input; }))
        inputs.push_back(std::move(in));
  }
  if (inputs.empty())
    return Status::error(opts.planPath.empty() ? "plan" : opts.planPath,
                         "the plan has no data inputs");
  DTC_ASSIGN_OR_RETURN(Dataset trainData, Dataset::load(opts.dataPath, inputs));
  std::optional<Dataset> val;
  if (!opts.valDataPath.empty()) {
    DTC_ASSIGN_OR_RETURN(Dataset v, Dataset::load(opts.valDataPath, inputs));
    val = std::move(v);
  }
  const int rank = opts.comm ? opts.comm->rank() : opts.parameters ? opts.workerRank : 0;
  if (plan.has_parameter_host() != (opts.parameters != nullptr))
    return Status::error(opts.planPath.empty() ? "plan" : opts.planPath,
                         plan.has_parameter_host()
                             ? "a parameter-server plan: start it with dtc-run --local-cluster, "
                               "or each task with --cluster FILE --task TYPE:INDEX (or TF_CONFIG)"
                             : "is not a parameter-server plan");
  if (opts.parameters && (rank < 0 || rank >= plan.world_size()))
    return Status::error("worker " + std::to_string(rank),
                         "the plan has " + std::to_string(plan.world_size()) + " workers");
  if (opts.parameters && (!opts.checkpointDir.empty() || !opts.dumpGradientsPath.empty()))
    return Status::error(!opts.checkpointDir.empty() ? "--checkpoint-dir" : "--dump-gradients",
                         "is not supported for parameter-server plans yet");
  detail::TrainingLayout layout = detail::layoutOf(plan, rank);
  layout.batch = inputs[0].shape[0];
  for (const DataInput &in : inputs)
    if (in.shape[0] != layout.batch)
      return Status::error("input '" + in.input + "'",
                           "batch size " + std::to_string(in.shape[0]) + " differs from input '" +
                               inputs[0].input + "'s " + std::to_string(layout.batch));

  // Validated: a collective runs on one of the plan's groups.
  if ((plan.world_size() > 1 || plan.groups_size() > 0) && !opts.comm && !opts.parameters)
    return Status::error(opts.planPath.empty() ? "plan" : opts.planPath,
                         "a plan for " + std::to_string(plan.world_size()) +
                             " rank(s): start it with dtc-run --nproc " +
                             std::to_string(plan.world_size()) + " or mpirun -n " +
                             std::to_string(plan.world_size()) + " dtc-run ...");
  ExecutorOptions eo;
  eo.planPath = opts.planPath;
  eo.modelPath = opts.modelPath;
  eo.threads = opts.threads;
  eo.cudaWorkspaceMb = opts.cudaWorkspaceMb;
  eo.commTimeoutSeconds = opts.commTimeoutSeconds;
  eo.profile = opts.profile != nullptr;
  eo.rank = rank;
  eo.comm = opts.comm;
  eo.tracer = opts.tracer;
  DTC_ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::create(plan, eo));
  detail::Trainer trainer(ex->plan(), opts, *ex, trainData, val ? &*val : nullptr, std::move(layout));
  Status s = trainer.run();
  if (s.isOk() && opts.profile)
    ex->profiler().print(*opts.profile, ex->arenaBytes());
  return s;
}

} // namespace dtc::rt
