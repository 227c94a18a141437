// dtc-compile: imports an ONNX model, runs the compile pipeline (or a chosen pass list) and
// emits the result as textual IR, ONNX or Graphviz dot (DESIGN.md section 9).
// Exit codes: 0 ok, 1 error (printed as "error: <where>: <what>"), 2 usage.
#include "compiler/driver/Driver.h"
#include "compiler/driver/ParameterHost.h"
#include "compiler/driver/TrainConfig.h"
#include "compiler/ir/Printer.h"
#include "compiler/ir/Sharding.h"
#include "compiler/onnx/Exporter.h"
#include "compiler/plan/Lowering.h"
#include "compiler/plan/Parallel.h"
#include "compiler/support/FileIO.h"
#include "passes/Passes.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdint>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace {

/// "a, b,,c" -> {"a", "b", "c"}: items trimmed, empty ones dropped.
std::vector<std::string> splitComma(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos)
      out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

/// Usage error (exit 2) for a pass name that does not exist.
bool checkPassNames(const std::vector<std::string> &names, const char *flag, bool allowAll) {
  for (const std::string &n : names) {
    if ((allowAll && n == "all") || dtc::passes::createPassByName(n))
      continue;
    std::string known;
    for (const std::string &k : dtc::passes::allPassNames())
      known += (known.empty() ? "" : ", ") + k;
    std::fprintf(stderr, "error: %s: unknown pass '%s' (known: %s%s)\n", flag, n.c_str(),
                 known.c_str(), allowAll ? ", all" : "");
    return false;
  }
  return true;
}

// Messages carry names from the model (nodes, tensors): control characters are escaped so that
// a name cannot start a line of its own (a forged "error:" line).
int fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", dtc::escapeControl(message).c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"dtc-compile: compile an ONNX model for (distributed) training"};
  app.set_version_flag("--version", "dtc-compile 0.1.0");
  std::string model, output, emit, passes, printAfter;
  std::vector<std::string> dimFlags;
  int64_t batchSize = 0;
  int rank = -1;
  bool verifyEach = false, timePasses = false, inference = false, noMemoryReuse = false;
  bool noFusion = false, noChannelsLast = false, untieInitializers = false;
  // Training options: parsed into `flags`, applied over the --config file's values.
  dtc::TrainingConfig flags;
  std::string strategy = "single", configPath, betas;
  app.add_option("model", model, "ONNX model (.onnx binary or .onnxtxt text)")->required();
  auto *train = app.add_option_group("training", "training plans (the default without --inference)");
  train->add_option("--strategy", strategy,
                    "distribution strategy: single (one device, the default), dp=N "
                    "(synchronous data parallelism over N ranks; --batch-size is the global "
                    "batch), pp=S[,microbatches=M][,schedule=gpipe|1f1b|zb-h1|interleaved]"
                    "[,virtual-stages=V] (pipeline parallelism over S stages, M micro-batches "
                    "per step, default M=S and 1f1b; interleaved: V model chunks per stage, "
                    "default 2, M a multiple of S), tp=T (tensor parallelism: weights split "
                    "Megatron-style over T ranks), or a mesh of them: dp=D,pp=S,tp=T on D*S*T "
                    "ranks; ps=S:W (S parameter servers, W workers, over gRPC; see "
                    "--staleness) or cs=N (central storage: one process, N devices)");
  std::string ppCuts, deviceMemory;
  std::vector<std::string> tpShards;
  train->add_option("--tp-shard", tpShards,
                    "tp: split weight NAME along AXIS (NAME=AXIS, repeatable) instead of "
                    "letting the sharding rules choose");
  train->add_flag("--sequence-parallel", flags.sequenceParallel,
                  "tp=T: run LayerNorms, residual and bias adds split along the sequence "
                  "(reduce-scatter and all-gather in place of the all-reduces; Korthikanti et "
                  "al. 2022)");
  train->add_option("--staleness", flags.staleness,
                    "ps=S:W: steps a worker may run ahead of the slowest live worker; 0 is "
                    "synchronous (each update the mean of the W gradients, as dp=W); -1 "
                    "(default) is fully asynchronous (each gradient applied as it arrives, "
                    "by the --async-rule)");
  train->add_option("--async-rule", flags.asyncRule,
                    "ps=S:W, asynchronous: scaled (default: each push one optimizer step on its "
                    "gradient scaled by 1/W) or aggregate (each step the mean of the next "
                    "pushes, one per live worker, whoever sent them: as many steps per epoch as "
                    "dp=W) or staleness-lr (each push one step on its unscaled gradient at lr / "
                    "its staleness, the updates since the worker pulled; Zhang et al. 2016)");
  train->add_option("--ps-min-shard-bytes", flags.psMinShardBytes,
                    "ps=S:W: split a parameter larger than this along axis 0 into up to S "
                    "shards of at least this size (default 262144)");
  train->add_option("--device-memory", deviceMemory,
                    "memory of one device, e.g. 16G or 512MiB: every rank's arena must fit "
                    "(an error names the rank otherwise); pp=S balances its stages under it");
  train->add_option("--pp-cuts", ppCuts,
                    "pp=S: the S-1 stage boundaries (S*V-1 with virtual-stages=V), comma-separated node or tensor names in "
                    "topological order; a stage ends after each named node (or the node "
                    "computing the named tensor). Default: balanced by estimated time");
  train->add_option("--bucket-mb", flags.bucketMb,
                    "dp: gradient all-reduce bucket size in MiB (default 25; the first bucket "
                    "is at most 1 MiB)");
  train->add_option("--zero", flags.zero,
                    "dp: ZeRO stage (Rajbhandari et al. 2020): 1 shards the optimizer state "
                    "over the dp ranks (each updates its 1/N of every gradient bucket, then the "
                    "parameters are all-gathered), 2 also reduce-scatters the gradients; 0 "
                    "(default) replicates both");
  train->add_option("--precision", flags.precision,
                    "fp32 (default) or bf16: MatMul, Gemm and Conv (forward and backward) in "
                    "bfloat16 with f32 accumulation, master weights, optimizer state and every "
                    "other op in f32 (autocast; README \"Mixed precision\")");
  train->add_option("--loss-scale", flags.lossScale,
                    "dynamic, off or a constant: the backward pass starts from this scale and the "
                    "optimizer unscales; steps with non-finite gradients are skipped and counted "
                    "(torch GradScaler; default dynamic for fp16, off otherwise)");
  train->add_option("--loss-scale-init", flags.lossScaleInit,
                    "--loss-scale dynamic: the initial scale (default 65536)");
  train->add_option("--loss-scale-window", flags.lossScaleWindow,
                    "--loss-scale dynamic: finite steps after which the scale doubles (default "
                    "2000); a skipped step halves it");
  train->add_flag("--sync-batchnorm", flags.syncBatchNorm,
                  "dp: BatchNormalization statistics over all ranks (default: per rank)");
  train->add_option("--config", configPath,
                    "JSON file of training options (keys: the flag names without dashes); flags "
                    "override it");
  train->add_option("--loss", flags.loss,
                    "softmax-cross-entropy (default), mse, bce-with-logits, or model (the model "
                    "outputs its loss)");
  train->add_option("--loss-output", flags.lossOutput,
                    "model output the loss reads (default: the first)");
  train->add_option("--label-name", flags.labelName, "name of the label input (default: label)");
  std::string ignoreIndex;
  train->add_option("--ignore-index", ignoreIndex,
                    "softmax-cross-entropy: label value that carries no loss (default -100)");
  train->add_option("--class-axis", flags.classAxis,
                    "softmax-cross-entropy: class axis of the scores (default 1; -1 for (N,T,V) "
                    "language-model logits)");
  train->add_option("--optimizer", flags.optimizer, "sgd (default), adam, adamw");
  train->add_option("--lr", flags.lr, "learning rate (default 0.01)");
  train->add_option("--momentum", flags.momentum, "SGD momentum (default 0)");
  train->add_flag("--nesterov", flags.nesterov, "SGD with Nesterov momentum");
  train->add_option("--weight-decay", flags.weightDecay,
                    "L2 penalty (sgd, adam) or decoupled weight decay (adamw); default 0");
  train->add_option("--betas", betas, "Adam betas: B1,B2 (default 0.9,0.999)");
  train->add_option("--eps", flags.eps, "Adam epsilon (default 1e-8)");
  train->add_option("--lr-schedule", flags.lrSchedule, "constant (default), step, cosine");
  train->add_option("--warmup-steps", flags.warmupSteps, "linear warm-up steps (default 0)");
  train->add_option("--step-size", flags.stepSize, "step schedule: decay every N steps");
  train->add_option("--gamma", flags.gamma, "step schedule: decay factor (default 0.1)");
  train->add_option("--total-steps", flags.totalSteps, "cosine schedule: length in steps");
  train->add_option("--min-lr", flags.minLr, "cosine schedule: final learning rate (default 0)");
  train->add_option("--clip-grad-norm", flags.clipGradNorm,
                    "clip gradients to this global L2 norm (default 0: off)");
  train->add_option("--grad-accum-steps", flags.gradAccumSteps,
                    "micro-batches per optimizer step (default 1)");
  train->add_option("--freeze", flags.freeze,
                    "do not train parameters whose name matches this regular expression");
  train->add_flag("--untie-initializers", untieInitializers,
                  "give every use of a constant-filled floating-point initializer its own copy "
                  "(weights an exporter merged because they were equal, e.g. torch.onnx.export's "
                  "default optimizer: every LayerNorm's ones, every zero bias)");
  app.add_option("-o,--output", output, "output file (default: standard output for ir/dot)");
  app.add_option("--emit", emit,
                 "what to write: ir, onnx, dot, summary, plan (binary, the default with "
                 "--inference) or plan-text (its canonical text)")
      ->check(CLI::IsMember({"ir", "onnx", "dot", "summary", "plan", "plan-text"}));
  app.add_flag("--inference", inference, "compile a forward-only plan (for dtc-run --infer)");
  app.add_option("--batch-size", batchSize,
                 "bind the symbolic leading (batch) dim of the graph inputs to this size");
  app.add_option("--dim", dimFlags, "bind a symbolic dim: --dim T=16 (repeatable)");
  app.add_option("--rank", rank,
                 "with --emit plan-text: print only this rank's program; with --emit onnx: write "
                 "this rank's graph (its stage's nodes, its shards of split weights)")
      ->check(CLI::Range(0, 1 << 30)); // NonNegativeNumber's message printed DBL_MAX in full
  app.add_flag("--no-memory-reuse", noMemoryReuse,
               "give every buffer its own arena bytes (for debugging the memory planner)");
  std::string device = "cpu";
  app.add_option("--device", device,
                 "device the plan runs on: cpu (oneDNN kernels, the default) or cuda (cuBLAS, "
                 "cuDNN and CUDA kernels, NCCL); an op without a kernel there is an error")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--no-fusion", noFusion,
               "do not fuse Conv+Relu / Conv+Add(+Relu) into ai.dtc.FusedConv");
  app.add_flag(
      "--no-channels-last", noChannelsLast,
      "keep every activation row-major (NCHW) instead of channels-last between convolutions");
  app.add_option("--passes", passes,
                 "comma-separated pass list to run instead of the default pipeline "
                 "(empty: import only)");
  app.add_option("--print-after", printAfter,
                 "print the IR after these passes (comma-separated names, or 'all')");
  app.add_flag("--verify-each", verifyEach, "run the IR verifier after every pass");
  app.add_flag("--time-passes", timePasses, "report the wall time of every pass on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    std::fprintf(stderr, "error: %s\nRun with --help for usage.\n", e.what());
    return 2;
  }

  // An empty file name is a mistake (an unset shell variable), never "no file".
  for (const char *flag : {"--output", "--config"})
    if (app.count(flag) && app[flag]->as<std::string>().empty()) {
      std::fprintf(stderr, "error: %s: empty file name\n", flag);
      return 2;
    }
  if (model.empty()) {
    std::fprintf(stderr, "error: model: empty file name\n");
    return 2;
  }
  if (app.count("--ignore-index")) {
    // strtoll reports overflow (CLI11 would clamp to INT64_MAX silently).
    errno = 0;
    char *end = nullptr;
    long long v = std::strtoll(ignoreIndex.c_str(), &end, 10);
    if (ignoreIndex.empty() || !end || *end || errno == ERANGE) {
      std::fprintf(stderr, "error: --ignore-index %s: expected an integer in [%lld, %lld]\n",
                   dtc::escapeControl(ignoreIndex).c_str(), static_cast<long long>(INT64_MIN),
                   static_cast<long long>(INT64_MAX));
      return 2;
    }
    flags.ignoreIndex = v;
  }
  // The output is checked before any work: not a device, FIFO or directory, and not the model
  // or the --config file (by device and inode).
  if (!output.empty() && output != "-") {
    if (dtc::Status s = dtc::checkOutputTarget(output); !s.isOk())
      return fail(s.message());
    if (dtc::Status s = dtc::checkDistinctFiles({{"-o", output}},
                                                {{"the model", model}, {"--config", configPath}});
        !s.isOk())
      return fail(s.message());
  }
  if (app.count("--batch-size") && batchSize < 1) {
    std::fprintf(stderr, "error: --batch-size: must be at least 1, got %lld\n",
                 static_cast<long long>(batchSize));
    return 2;
  }
  // A training plan: any training flag, --emit plan(-text), or "-o NAME.dtc" (the plan suffix).
  const std::vector<const char *> trainingFlags = {"--strategy",
                                                   "--config",
                                                   "--loss",
                                                   "--optimizer",
                                                   "--lr",
                                                   "--momentum",
                                                   "--nesterov",
                                                   "--weight-decay",
                                                   "--betas",
                                                   "--eps",
                                                   "--lr-schedule",
                                                   "--warmup-steps",
                                                   "--step-size",
                                                   "--gamma",
                                                   "--total-steps",
                                                   "--min-lr",
                                                   "--clip-grad-norm",
                                                   "--grad-accum-steps",
                                                   "--freeze",
                                                   "--untie-initializers",
                                                   "--loss-output",
                                                   "--label-name",
                                                   "--ignore-index",
                                                   "--class-axis",
                                                   "--bucket-mb",
                                                   "--sync-batchnorm",
                                                   "--zero",
                                                   "--pp-cuts",
                                                   "--device-memory",
                                                   "--tp-shard",
                                                   "--sequence-parallel",
                                                   "--staleness",
                                                   "--async-rule",
                                                   "--ps-min-shard-bytes",
                                                   "--precision",
                                                   "--loss-scale",
                                                   "--loss-scale-init",
                                                   "--loss-scale-window"};
  bool anyTrainingFlag = false;
  for (const char *f : trainingFlags) {
    anyTrainingFlag = anyTrainingFlag || app.count(f);
    if (inference && app.count(f)) {
      std::fprintf(stderr, "error: %s: a training option; --inference plans do not train\n", f);
      return 2;
    }
  }
  const bool dtcSuffix = output.size() > 4 && output.compare(output.size() - 4, 4, ".dtc") == 0;
  const bool training = !inference && (anyTrainingFlag || emit == "plan" ||
                                       emit == "plan-text" || (emit.empty() && dtcSuffix));
  if (emit.empty())
    emit = inference || training ? "plan" : "ir";
  const bool wantsPlan = emit == "plan" || emit == "plan-text";
  if ((emit == "onnx" || emit == "plan") && (output.empty() || output == "-")) {
    std::fprintf(stderr, "error: --emit %s needs an output file (-o)\n", emit.c_str());
    return 2;
  }
  // The training configuration: defaults, then the --config file, then explicit flags.
  dtc::TrainingConfig cfg;
  if (training) {
    if (!configPath.empty()) {
      dtc::Status s = dtc::driver::readTrainConfigFile(configPath, cfg, strategy);
      if (!s.isOk())
        return fail(s.message());
      if (app.count("--strategy"))
        strategy = app["--strategy"]->as<std::string>();
    }
    if (app.count("--loss")) cfg.loss = flags.loss;
    if (app.count("--loss-output")) cfg.lossOutput = flags.lossOutput;
    if (app.count("--label-name")) cfg.labelName = flags.labelName;
    if (app.count("--ignore-index")) cfg.ignoreIndex = flags.ignoreIndex;
    if (app.count("--class-axis")) cfg.classAxis = flags.classAxis;
    if (app.count("--optimizer")) cfg.optimizer = flags.optimizer;
    if (app.count("--lr")) cfg.lr = flags.lr;
    if (app.count("--momentum")) cfg.momentum = flags.momentum;
    if (app.count("--nesterov")) cfg.nesterov = flags.nesterov;
    if (app.count("--weight-decay")) cfg.weightDecay = flags.weightDecay;
    if (app.count("--eps")) cfg.eps = flags.eps;
    if (app.count("--lr-schedule")) cfg.lrSchedule = flags.lrSchedule;
    if (app.count("--warmup-steps")) cfg.warmupSteps = flags.warmupSteps;
    if (app.count("--step-size")) cfg.stepSize = flags.stepSize;
    if (app.count("--gamma")) cfg.gamma = flags.gamma;
    if (app.count("--total-steps")) cfg.totalSteps = flags.totalSteps;
    if (app.count("--min-lr")) cfg.minLr = flags.minLr;
    if (app.count("--clip-grad-norm")) cfg.clipGradNorm = flags.clipGradNorm;
    if (app.count("--grad-accum-steps")) cfg.gradAccumSteps = flags.gradAccumSteps;
    if (app.count("--freeze")) cfg.freeze = flags.freeze;
    if (app.count("--untie-initializers")) cfg.untieInitializers = true;
    if (app.count("--batch-size")) cfg.batchSize = batchSize;
    if (app.count("--betas")) {
      std::vector<std::string> parts = splitComma(betas);
      char *e1 = nullptr, *e2 = nullptr;
      if (parts.size() == 2) {
        cfg.beta1 = std::strtof(parts[0].c_str(), &e1);
        cfg.beta2 = std::strtof(parts[1].c_str(), &e2);
      }
      if (parts.size() != 2 || !e1 || *e1 || !e2 || *e2) {
        std::fprintf(stderr, "error: --betas %s: expected B1,B2, e.g. --betas 0.9,0.999\n",
                     betas.c_str());
        return 2;
      }
    }
    if (app.count("--bucket-mb")) cfg.bucketMb = flags.bucketMb;
    if (app.count("--sync-batchnorm")) cfg.syncBatchNorm = flags.syncBatchNorm;
    if (app.count("--sequence-parallel")) cfg.sequenceParallel = true;
    if (app.count("--zero"))
      cfg.zero = flags.zero;
    if (app.count("--staleness")) cfg.staleness = flags.staleness;
    if (app.count("--async-rule")) cfg.asyncRule = flags.asyncRule;
    if (app.count("--ps-min-shard-bytes")) cfg.psMinShardBytes = flags.psMinShardBytes;
    if (app.count("--precision")) cfg.precision = flags.precision;
    if (app.count("--loss-scale"))
      cfg.lossScale = flags.lossScale;
    if (app.count("--loss-scale-init"))
      cfg.lossScaleInit = flags.lossScaleInit;
    if (app.count("--loss-scale-window"))
      cfg.lossScaleWindow = flags.lossScaleWindow;
    if (app.count("--pp-cuts")) {
      cfg.ppCuts = splitComma(ppCuts);
      const size_t commas = static_cast<size_t>(std::count(ppCuts.begin(), ppCuts.end(), ','));
      if (cfg.ppCuts.empty() || cfg.ppCuts.size() != commas + 1) {
        std::fprintf(stderr, "error: --pp-cuts '%s': expected comma-separated node or tensor "
                             "names, none empty\n", ppCuts.c_str());
        return 2;
      }
    }
    for (const std::string &item : tpShards) {
      const size_t eq = item.rfind('=');
      int64_t axis = 0;
      bool ok = eq != std::string::npos && eq > 0 && eq + 1 < item.size();
      if (ok) {
        char *end = nullptr;
        errno = 0;
        const long long a = std::strtoll(item.c_str() + eq + 1, &end, 10);
        ok = errno == 0 && *end == '\0' && a >= -64 && a < 64;
        axis = a;
      }
      if (!ok) {
        std::fprintf(stderr, "error: --tp-shard '%s': expected NAME=AXIS (an integer axis)\n",
                     item.c_str());
        return 2;
      }
      cfg.tpShard.emplace_back(item.substr(0, eq), axis);
    }
    if (app.count("--device-memory")) {
      auto bytes = dtc::driver::parseByteSize(deviceMemory, "--device-memory");
      if (!bytes) {
        std::fprintf(stderr, "error: %s\n", bytes.status().message().c_str());
        return 2;
      }
      cfg.deviceMemory = *bytes;
    }
    if (dtc::Status s = dtc::driver::parseStrategy(strategy, cfg); !s.isOk()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 2;
    }
    dtc::Status v = dtc::driver::validateTrainConfig(cfg);
    if (!v.isOk()) {
      std::fprintf(stderr, "error: %s\n", v.message().c_str());
      return 2;
    }
  }
  if (rank >= 0 && emit != "plan-text" && emit != "onnx") {
    std::fprintf(stderr, "error: --rank applies to --emit plan-text and --emit onnx\n");
    return 2;
  }
  dtc::plan::LowerOptions lowerOpts;
  if (app.count("--batch-size"))
    lowerOpts.batchSize = batchSize;
  if (training)
    lowerOpts.batchSize = cfg.rankBatchSize();
  for (const std::string &d : dimFlags) {
    size_t eq = d.find('=');
    char *end = nullptr;
    long long v = eq == std::string::npos ? 0 : std::strtoll(d.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq == 0 || !end || *end || end == d.c_str() + eq + 1) {
      std::fprintf(stderr, "error: --dim %s: expected NAME=SIZE, e.g. --dim T=16\n", d.c_str());
      return 2;
    }
    lowerOpts.dims[d.substr(0, eq)] = v;
  }
  lowerOpts.reuseMemory = !noMemoryReuse;
  lowerOpts.fuse = !noFusion;
  lowerOpts.channelsLast = !noChannelsLast;
  lowerOpts.device = *dtc::ops::parseDeviceKind(device);
  if (lowerOpts.device == dtc::ops::DeviceKind::kCuda && training &&
      cfg.mesh.hasParameterHost()) {
    std::fprintf(stderr, "error: --device cuda: parameter servers and central storage (ps=S:W, "
                         "cs=N) run on the CPU only so far\n");
    return 2;
  }

  if (!checkPassNames(splitComma(passes), "--passes", false) ||
      !checkPassNames(splitComma(printAfter), "--print-after", true))
    return 2;

  dtc::driver::CompileOptions opts;
  opts.modelPath = model;
  opts.untieInitializers = training && cfg.untieInitializers;
  opts.inference = inference;
  lowerOpts.untieInitializers = opts.untieInitializers;
  if (app.count("--passes")) {
    opts.useDefaultPipeline = false;
    opts.passes = splitComma(passes);
  }
  for (const std::string &p : splitComma(printAfter))
    opts.printAfter.insert(p);
  opts.verifyEach = verifyEach;
  opts.timePasses = timePasses;
  opts.printStream = &std::cout;
  opts.timeStream = &std::cerr;

  dtc::Diagnostics diags;
  auto graph = dtc::driver::compileModel(opts, diags);
  diags.flush();
  if (!graph)
    return fail(graph.status().message());

  dtc::ir::Graph &g = **graph;
  if (inference || training || lowerOpts.batchSize || !lowerOpts.dims.empty()) {
    dtc::Status s = dtc::passes::bindDims(g, lowerOpts.dims, lowerOpts.batchSize, diags);
    diags.flush();
    if (!s.isOk())
      return fail(s.message());
  }
  // The plan records checksums of the model and its external data: hash them (gigabytes for a
  // large model) on a background thread while the training passes and lowering run.
  std::optional<dtc::plan::ChecksumPrefetch> checksums;
  if (wantsPlan) {
    std::vector<dtc::plan::ChecksumPrefetch::File> files{
        {model, "the model", dtc::kMaxModelFileBytes}};
    for (const std::string &f : dtc::plan::externalDataFiles(g))
      files.push_back({f, "the model's external data", dtc::kMaxExternalDataBytes});
    checksums.emplace(std::move(files));
    lowerOpts.checksums = &*checksums;
  }
  const dtc::TrainingConfig baseCfg = cfg; // before the passes record anything in it
  // --emit onnx --rank R on a tensor-parallel mesh: build the graph for R's tp index, whose
  // shapes differ from index 0's where a split is uneven (numpy.array_split ranges).
  if (training && emit == "onnx" && rank >= 0 && cfg.mesh.tp > 1 &&
      !cfg.mesh.hasParameterHost() && rank < cfg.mesh.worldSize())
    cfg.tpIndex = cfg.mesh.coordOf(rank).tp;
  if (training) {
    dtc::passes::PassManagerOptions report;
    report.printAfter = opts.printAfter;
    report.timePasses = timePasses;
    report.printStream = &std::cout;
    report.timeStream = &std::cerr;
    dtc::Status s = dtc::driver::runTrainingPasses(g, cfg, diags, verifyEach, report);
    diags.flush();
    if (!s.isOk())
      return fail(s.message());
  }
  if (wantsPlan) {
    namespace fs = std::filesystem;
    std::error_code ec;
    // The plan names the model relative to its own folder, so the pair can move together.
    fs::path base = emit == "plan" ? fs::absolute(output, ec).parent_path() : fs::current_path(ec);
    fs::path rel = fs::absolute(model, ec).lexically_normal().lexically_relative(base);
    lowerOpts.modelPath = rel.empty() ? fs::absolute(model, ec).string() : rel.string();
    lowerOpts.modelFile = model;
    auto t0 = std::chrono::steady_clock::now();
    // ps=S:W and cs=N: the servers' graphs (their optimizer updates) beside the workers'.
    std::optional<dtc::ir::ParameterHost> host;
    if (training && cfg.mesh.hasParameterHost()) {
      dtc::passes::PassManagerOptions report;
      report.printAfter = opts.printAfter;
      report.printStream = &std::cout;
      report.verifyEach = verifyEach;
      auto built = dtc::driver::buildParameterHost(g, cfg, report);
      if (!built)
        return fail(built.status().message());
      host = std::move(*built);
    }
    // Uneven tensor-parallel splits: the graph holds the shapes of tp index 0's class (the
    // indices whose range lengths agree on every unevenly split axis); one index of each other
    // class is compiled and lowered the same way, while index 0's plan is lowered, and every
    // index gets its class's programs (identical programs are stored once).
    const bool tpClasses = training && cfg.tpUneven && cfg.mesh.tp > 1;
    auto classOf = [&](int64_t t) {
      std::vector<int64_t> lengths;
      for (int64_t size : cfg.tpUnevenSizes)
        lengths.push_back(dtc::ir::splitRange(size, cfg.mesh.tp, t).length);
      return lengths;
    };
    std::vector<int64_t> classIndex;   // per tp index: its class's position in classPlans (-1: 0's)
    std::vector<int64_t> firstOfClass; // per class other than 0's: the index compiled for it
    if (tpClasses) {
      std::map<std::vector<int64_t>, int64_t> seen{{classOf(0), -1}};
      for (int64_t t = 0; t < cfg.mesh.tp; ++t) {
        auto [it, fresh] = seen.emplace(classOf(t), static_cast<int64_t>(firstOfClass.size()));
        if (fresh)
          firstOfClass.push_back(t);
        classIndex.push_back(it->second);
      }
    }
    std::optional<dtc::Expected<dtc::plan::Plan>> lowered;
    std::vector<dtc::plan::Plan> classPlans(firstOfClass.size());
    auto compileClass = [&](int64_t t, dtc::plan::Plan &out) -> dtc::Status {
      dtc::driver::CompileOptions quiet = opts;
      quiet.printAfter.clear();
      quiet.timePasses = false;
      dtc::Diagnostics silent; // the warnings of index 0's compilation, again
      auto gt = dtc::driver::compileModel(quiet, silent);
      if (!gt)
        return gt.status();
      dtc::TrainingConfig cfgT = baseCfg;
      cfgT.tpIndex = t;
      std::map<std::string, int64_t> dims = lowerOpts.dims;
      DTC_RETURN_IF_ERROR(dtc::passes::bindDims(**gt, dims, lowerOpts.batchSize, silent));
      DTC_RETURN_IF_ERROR(dtc::driver::runTrainingPasses(**gt, cfgT, silent, verifyEach, {}));
      dtc::plan::LowerOptions lowerT = lowerOpts;
      lowerT.modelFile.clear(); // the model's checksums are index 0's plan's
      lowerT.checksums = nullptr;
      DTC_ASSIGN_OR_RETURN(out, dtc::plan::lowerTraining(**gt, cfgT, lowerT));
      return dtc::Status::ok();
    };
    const dtc::Status classes = dtc::plan::parallelFor(
        1 + firstOfClass.size(), dtc::plan::compileThreads(), [&](size_t i) -> dtc::Status {
          if (i > 0)
            return compileClass(firstOfClass[i - 1], classPlans[i - 1]);
          lowered.emplace(training
                              ? dtc::plan::lowerTraining(g, cfg, lowerOpts, host ? &*host : nullptr)
                              : dtc::plan::lowerInference(g, lowerOpts));
          return lowered->status();
        });
    if (!classes.isOk())
      return fail(classes.message());
    dtc::plan::Plan *plan = &**lowered;
    if (tpClasses) {
      std::vector<const dtc::plan::Plan *> others;
      for (int64_t t = 1; t < cfg.mesh.tp; ++t) {
        const int64_t c = classIndex[static_cast<size_t>(t)];
        others.push_back(c < 0 ? nullptr : &classPlans[static_cast<size_t>(c)]);
      }
      if (dtc::Status s = dtc::plan::mergeTensorParallelPlans(*plan, others); !s.isOk())
        return fail(s.message());
    }
    // --time-passes: lowering (kernel checks, memory planning, every program) and writing.
    auto reportTime = [&](const char *what, std::chrono::steady_clock::time_point since) {
      if (timePasses)
        std::fprintf(stderr, "  %10.3f ms  %s\n",
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                               since)
                         .count(),
                     what);
    };
    reportTime("lowering", t0);
    if (emit == "plan") {
      auto t1 = std::chrono::steady_clock::now();
      dtc::Status s = dtc::plan::writePlanFile(*plan, output);
      if (!s.isOk())
        return fail(s.message());
      reportTime("writing the plan", t1);
      // One line per program (data-parallel replicas share theirs; a pipeline has one per
      // stage; uneven tensor-parallel splits one per stage and tp index, named).
      const bool perTpIndex = plan->mesh().tp() > 1 && cfg.tpUneven;
      for (int p = 0; p < plan->programs_size(); ++p) {
        const auto &r = plan->programs(p);
        std::string ranks = r.ranks_size() == 1 ? "rank " + std::to_string(r.ranks(0))
                                                : "each of " + std::to_string(r.ranks_size()) +
                                                      " ranks";
        std::set<int64_t> stages, tpIndices;
        for (int32_t k : r.ranks()) {
          stages.insert(plan->ranks(k).pp());
          tpIndices.insert(plan->ranks(k).tp());
        }
        auto list = [](const std::set<int64_t> &xs) {
          std::string s;
          for (int64_t x : xs)
            s += (s.empty() ? "" : ", ") + std::to_string(x);
          return s;
        };
        if (perTpIndex)
          ranks = (tpIndices.size() == 1 ? "tp index " : "tp indices ") + list(tpIndices) +
                  ", " + ranks;
        if (plan->mesh().pp() > 1)
          ranks = (stages.size() == 1 ? "stage " : "stages ") + list(stages) + ", " + ranks;
        if (plan->has_parameter_host()) {
          const bool central = plan->parameter_host().kind() ==
                               dtc::plan::ParameterHostInfo::CENTRAL_STORAGE;
          ranks = p == 0 ? (central ? "each of " + std::to_string(r.ranks_size()) + " devices"
                                    : "each of " + std::to_string(r.ranks_size()) + " workers")
                         : (central ? std::string("the host's update")
                                    : "server " + std::to_string(p - 1) + ", " +
                                          std::to_string(r.training().parameters_size()) +
                                          " parameter shard(s)");
        }
        // Collectives by kind; those of the tp group (activations, and the gradients of
        // replicated inputs of split layers) apart from the dp group's gradient buckets.
        int allReduces = 0, transfers = 0, scatters = 0, gathers = 0;
        int tpAllReduces = 0, tpScatters = 0, tpGathers = 0;
        for (const auto &ins : r.instructions()) {
          if (!ins.has_collective())
            continue;
          const auto kind = ins.collective().kind();
          const bool tp = ins.collective().group() == "tp";
          if (kind == dtc::plan::COLLECTIVE_SEND || kind == dtc::plan::COLLECTIVE_RECV)
            ++transfers;
          else if (kind == dtc::plan::COLLECTIVE_REDUCE_SCATTER)
            ++(tp ? tpScatters : scatters);
          else if (kind == dtc::plan::COLLECTIVE_ALL_GATHER)
            ++(tp ? tpGathers : gathers);
          else
            ++(tp ? tpAllReduces : allReduces);
        }
        std::string comm;
        auto count = [&comm](int n, const std::string &what) {
          if (n)
            comm += (comm.empty() ? "" : ", ") + std::to_string(n) + " " + what +
                    (n == 1 ? "" : "s");
        };
        count(allReduces, "gradient all-reduce bucket");
        count(scatters, "gradient reduce-scatter bucket");
        count(gathers, "all-gather");
        count(tpAllReduces, "tp all-reduce");
        count(tpScatters, "tp reduce-scatter");
        count(tpGathers, "tp all-gather");
        count(transfers, "send/recv");
        std::fprintf(stderr,
                     "%s: %s: %d instructions%s, %d buffers, arena %llu bytes (without reuse %llu "
                     "bytes)\n",
                     output.c_str(), ranks.c_str(), r.instructions_size(),
                     comm.empty() ? "" : (" (" + comm + ")").c_str(), r.buffers_size(),
                     static_cast<unsigned long long>(r.arena_bytes()),
                     static_cast<unsigned long long>(r.no_reuse_bytes()));
      }
      return 0;
    }
    if (rank >= plan->world_size())
      return fail("--rank " + std::to_string(rank) + ": the plan has " +
                  std::to_string(plan->world_size()) + " rank(s)");
    std::string text =
        dtc::plan::planText(*plan, rank >= 0 ? std::optional<int>(rank) : std::nullopt);
    if (output.empty() || output == "-") {
      std::cout << text;
      std::cout.flush();
      return std::cout ? 0 : fail("<stdout>: write failed");
    }
    dtc::Status s = dtc::writeFileAtomically(output, text);
    return s.isOk() ? 0 : fail(s.message());
  }
  if (emit == "onnx") {
    // --rank R: that rank's graph of the mesh (an inference or single-device compile has rank 0).
    dtc::Status s =
        rank >= 0
            ? dtc::onnxio::writeRankModelFile(g, training ? cfg.mesh : dtc::Mesh{}, rank, output)
            : dtc::onnxio::writeModelFile(g, output);
    return s.isOk() ? 0 : fail(s.message());
  }
  std::ostringstream text;
  if (emit == "ir")
    dtc::ir::printGraph(g, text);
  else if (emit == "summary")
    dtc::ir::printSummary(g, text);
  else
    dtc::ir::printDot(g, text);
  if (output.empty() || output == "-") {
    std::cout << text.str();
    std::cout.flush();
    return std::cout ? 0 : fail("<stdout>: write failed");
  }
  dtc::Status s = dtc::writeFileAtomically(output, text.str());
  return s.isOk() ? 0 : fail(s.message());
}
