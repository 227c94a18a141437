// Training options: the --config JSON file, value checks, and the training pass pipeline.
#include "compiler/driver/TrainConfig.h"

#include "compiler/ir/Verifier.h"
#include "compiler/support/FileIO.h"
#include "passes/Autodiff.h"
#include "passes/Passes.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <sstream>

namespace dtc::driver {
namespace {

/// "a, b" -> {"a", "b"} (spaces around names dropped, empty names kept so that the count check
/// rejects them).
std::vector<std::string> splitCuts(const std::string &text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const size_t len = comma == std::string::npos ? std::string::npos : comma - pos;
    const std::string item = text.substr(pos, len);
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    out.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
    if (comma == std::string::npos)
      return out;
    pos = comma + 1;
  }
}

using json = nlohmann::json;

/// The longest --freeze pattern accepted: the regular-expression parser (llvm::Regex) recurses
/// once per nested group, so the pattern is bounded; names of any length are matched without
/// recursion (passes/Autodiff.h, compileFreezePattern).
constexpr size_t kMaxFreezePatternChars = 256;

Status runPipeline(ir::Graph &graph, TrainingConfig &cfg, Diagnostics &diags,
                   const passes::PassManagerOptions &pm);

Status keyError(const std::string &path, const std::string &key, const std::string &what) {
  return Status::error(path, "key '" + key + "': " + what);
}

template <typename T> Status get(const std::string &path, const std::string &key, const json &v,
                                 T &out) {
  try {
    out = v.get<T>();
    return Status::ok();
  } catch (const json::exception &) {
    std::string want = std::is_same_v<T, std::string> ? "a string"
                       : std::is_same_v<T, bool>      ? "true or false"
                       : std::is_integral_v<T>        ? "an integer"
                                                      : "a number";
    return keyError(path, key, "expected " + want + ", got " + v.dump());
  }
}

} // namespace

Status readTrainConfigFile(const std::string &path, TrainingConfig &cfg,
                           std::string &strategy) {
  // A regular file of at most 1 MiB: a FIFO or /dev/zero is refused, never read without end.
  DTC_ASSIGN_OR_RETURN(std::string text, readInputFile(path, "--config", kMaxConfigFileBytes));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception &e) { // parse errors, and numbers out of range (1e400)
    return Status::error(path, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object())
    return Status::error(path, "expected a JSON object of training options");
  for (auto it = j.begin(); it != j.end(); ++it) {
    // Named copies: lambdas below capture them (clang rejects capturing structured bindings).
    const std::string key = it.key();
    const json &v = it.value();
    // Integers must be integers; JSON numbers like 32.0 are refused.
    auto integer = [&](int64_t &out) -> Status {
      if (!v.is_number_integer())
        return keyError(path, key, "expected an integer, got " + v.dump());
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})
        return keyError(path, key, "integer " + v.dump() + " is out of range (int64)");
      out = v.get<int64_t>();
      return Status::ok();
    };
    auto number = [&](float &out) -> Status {
      if (!v.is_number())
        return keyError(path, key, "expected a number, got " + v.dump());
      out = v.get<float>();
      return Status::ok();
    };
    Status s = Status::ok();
    if (key == "strategy")
      s = get(path, key, v, strategy);
    else if (key == "loss")
      s = get(path, key, v, cfg.loss);
    else if (key == "loss-output")
      s = get(path, key, v, cfg.lossOutput);
    else if (key == "label-name")
      s = get(path, key, v, cfg.labelName);
    else if (key == "ignore-index")
      s = integer(cfg.ignoreIndex);
    else if (key == "class-axis")
      s = integer(cfg.classAxis);
    else if (key == "optimizer")
      s = get(path, key, v, cfg.optimizer);
    else if (key == "lr")
      s = number(cfg.lr);
    else if (key == "momentum")
      s = number(cfg.momentum);
    else if (key == "nesterov")
      s = get(path, key, v, cfg.nesterov);
    else if (key == "weight-decay")
      s = number(cfg.weightDecay);
    else if (key == "betas") {
      if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number())
        return keyError(path, key, "expected [beta1, beta2], got " + v.dump());
      cfg.beta1 = v[0].get<float>();
      cfg.beta2 = v[1].get<float>();
    } else if (key == "eps")
      s = number(cfg.eps);
    else if (key == "lr-schedule")
      s = get(path, key, v, cfg.lrSchedule);
    else if (key == "warmup-steps")
      s = integer(cfg.warmupSteps);
    else if (key == "step-size")
      s = integer(cfg.stepSize);
    else if (key == "gamma")
      s = number(cfg.gamma);
    else if (key == "total-steps")
      s = integer(cfg.totalSteps);
    else if (key == "min-lr")
      s = number(cfg.minLr);
    else if (key == "clip-grad-norm")
      s = number(cfg.clipGradNorm);
    else if (key == "grad-accum-steps")
      s = integer(cfg.gradAccumSteps);
    else if (key == "freeze")
      s = get(path, key, v, cfg.freeze);
    else if (key == "untie-initializers")
      s = get(path, key, v, cfg.untieInitializers);
    else if (key == "batch-size")
      s = integer(cfg.batchSize);
    else if (key == "bucket-mb")
      s = number(cfg.bucketMb);
    else if (key == "sync-batchnorm")
      s = get(path, key, v, cfg.syncBatchNorm);
    else if (key == "zero")
      s = integer(cfg.zero);
    else if (key == "sequence-parallel")
      s = get(path, key, v, cfg.sequenceParallel);
    else if (key == "pp-cuts" && v.is_string()) // "a,b" as on the command line, or ["a", "b"]
      s = get(path, key, json(splitCuts(v.get<std::string>())), cfg.ppCuts);
    else if (key == "pp-cuts")
      s = get(path, key, v, cfg.ppCuts);
    else if (key == "device-memory") { // "16G" as on the command line, or a byte count
      if (!v.is_string() && !v.is_number_unsigned())
        return keyError(path, key, "expected a size such as \"16G\" or a byte count");
      auto bytes = parseByteSize(v.is_string() ? v.get<std::string>()
                                               : std::to_string(v.get<uint64_t>()),
                                 "--device-memory");
      if (!bytes)
        return keyError(path, key, bytes.status().message());
      cfg.deviceMemory = *bytes;
    } else if (key == "staleness")
      s = integer(cfg.staleness);
    else if (key == "async-rule")
      s = get(path, key, v, cfg.asyncRule);
    else if (key == "ps-min-shard-bytes")
      s = integer(cfg.psMinShardBytes);
    else if (key == "precision")
      s = get(path, key, v, cfg.precision);
    else if (key == "loss-scale") { // "dynamic", "off", or a number (as text or a JSON number)
      if (v.is_number())
        cfg.lossScale = v.dump();
      else if (v.is_string())
        cfg.lossScale = v.get<std::string>();
      else
        s = keyError(path, key, "expected \"dynamic\", \"off\" or a number, got " + v.dump());
    } else if (key == "loss-scale-init")
      s = number(cfg.lossScaleInit);
    else if (key == "loss-scale-window")
      s = integer(cfg.lossScaleWindow);
    else
      return keyError(path, key,
                      "unknown option (keys are dtc-compile's training flags without the "
                      "dashes: strategy, loss, loss-output, label-name, ignore-index, optimizer, "
                      "lr, momentum, nesterov, weight-decay, betas, eps, lr-schedule, "
                      "warmup-steps, step-size, gamma, total-steps, min-lr, clip-grad-norm, "
                      "grad-accum-steps, freeze, untie-initializers, batch-size, bucket-mb, "
                      "sync-batchnorm, zero, sequence-parallel, pp-cuts, device-memory, "
                      "staleness, async-rule, ps-min-shard-bytes, precision, loss-scale, "
                      "loss-scale-init, loss-scale-window)");
    DTC_RETURN_IF_ERROR(s);
  }
  return Status::ok();
}

Expected<uint64_t> parseByteSize(const std::string &text, const std::string &flag) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  const std::string suffix = text.substr(digits);
  int shift = -1;
  const char *units[][2] = {{"", ""}, {"K", "KiB"}, {"M", "MiB"}, {"G", "GiB"}, {"T", "TiB"}};
  for (int u = 0; u < 5; ++u)
    if (suffix == units[u][0] || suffix == units[u][1])
      shift = 10 * u;
  const std::string where = flag + " " + text;
  if (digits == 0 || digits > 19 || shift < 0)
    return Status::error(where, "expected a size in bytes with an optional K, M, G or T suffix "
                                "(powers of 1024), e.g. 16G or 512MiB");
  const uint64_t value = std::stoull(text.substr(0, digits));
  if (value == 0)
    return Status::error(where, "must be more than 0 bytes");
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift))
    return Status::error(where, "is too large");
  return value << shift;
}

Status parseStrategy(const std::string &strategy, TrainingConfig &cfg) {
  DTC_ASSIGN_OR_RETURN(Mesh mesh, parseMesh(strategy));
  cfg.mesh = mesh;
  return Status::ok();
}

/// `v` as printf's %.9g writes it (1.17549435e-38, 65536): std::to_string shows tiny scales as 0.
static std::string formatFloat(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
  return text;
}

/// The constant of --loss-scale <constant>; an error naming the flag unless a finite number > 0.
static Expected<float> lossScaleConstant(const std::string &text) {
  // Decimal only: strtof also reads hexadecimal ("0x10"), leading blanks, "inf" and "nan".
  const bool decimal = !text.empty() &&
                       (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.') &&
                       text.find_first_not_of("0123456789.eE+-") == std::string::npos;
  char *end = nullptr;
  errno = 0;
  const float v = decimal ? std::strtof(text.c_str(), &end) : 0.0f;
  if (!decimal || !end || *end || errno == ERANGE || !std::isfinite(v) || v <= 0)
    return Status::error("--loss-scale",
                         "expected dynamic, off or a finite number > 0, got '" + text + "'");
  return v;
}

/// --loss-scale, --loss-scale-init and --loss-scale-window, and the strategies they support.
static Status validateLossScale(const TrainingConfig &c) {
  const std::string mode = c.lossScaleMode();
  if (mode != "off" && mode != "dynamic")
    DTC_RETURN_IF_ERROR(lossScaleConstant(mode).status());
  // At least the smallest normal float: the updates multiply by 1/S, which must be finite (a
  // subnormal S such as 1e-45 made it infinite and the first update NaN).
  if (!std::isfinite(c.lossScaleInit) || c.lossScaleInit < std::numeric_limits<float>::min())
    return Status::error("--loss-scale-init",
                         "must be a finite number of at least " +
                             formatFloat(std::numeric_limits<float>::min()) + ", got " +
                             formatFloat(c.lossScaleInit));
  if (c.lossScaleWindow < 1 || c.lossScaleWindow > (int64_t{1} << 24))
    return Status::error("--loss-scale-window", "must be in [1, 16777216] steps, got " +
                                                    std::to_string(c.lossScaleWindow));
  if (mode != "dynamic" && (c.lossScaleInit != 65536.0f || c.lossScaleWindow != 2000))
    return Status::error(c.lossScaleInit != 65536.0f ? "--loss-scale-init" : "--loss-scale-window",
                         "applies to --loss-scale dynamic");
  if (mode == "off")
    return Status::ok();
  // The skip decision must be the same on every rank: with data parallelism alone every rank
  // checks the same all-reduced gradients; shards (ZeRO, tp), stages (pp) and parameter hosts
  // would need the flag reduced over the world first.
  const std::string what = "--loss-scale " + mode;
  if (c.mesh.hasParameterHost() || c.mesh.pp > 1 || c.mesh.tp > 1 || !c.tpShard.empty())
    return Status::error(what,
                         "is supported with --strategy single and dp=N only, not " + c.mesh.text());
  if (c.zero > 0)
    return Status::error(what, "is not supported with --zero yet");
  if (c.gradAccumSteps > 1)
    return Status::error(what, "is not supported with --grad-accum-steps > 1 yet");
  return Status::ok();
}

Status validateTrainConfig(const TrainingConfig &c) {
  auto bad = [](const std::string &flag, const std::string &what) {
    return Status::error(flag, what);
  };
  auto finite = [](float v) { return std::isfinite(v); };
  if (c.loss != "softmax-cross-entropy" && c.loss != "mse" && c.loss != "bce-with-logits" &&
      c.loss != "model")
    return bad("--loss", "unknown loss '" + c.loss +
                             "' (known: softmax-cross-entropy, mse, bce-with-logits, model)");
  if (c.optimizer != "sgd" && c.optimizer != "adam" && c.optimizer != "adamw")
    return bad("--optimizer", "unknown optimizer '" + c.optimizer + "' (known: sgd, adam, adamw)");
  if (!finite(c.lr) || c.lr < 0)
    return bad("--lr", "must be a finite number >= 0, got " + std::to_string(c.lr));
  if (!finite(c.momentum) || c.momentum < 0 || c.momentum >= 1)
    return bad("--momentum", "must be in [0, 1), got " + std::to_string(c.momentum));
  if (c.nesterov && (c.optimizer != "sgd" || c.momentum <= 0))
    return bad("--nesterov", "needs --optimizer sgd with --momentum > 0 (as torch.optim.SGD)");
  if (!finite(c.weightDecay) || c.weightDecay < 0)
    return bad("--weight-decay", "must be >= 0, got " + std::to_string(c.weightDecay));
  for (float b : {c.beta1, c.beta2})
    if (!finite(b) || b < 0 || b >= 1)
      return bad("--betas", "each beta must be in [0, 1), got " + std::to_string(c.beta1) + "," +
                                std::to_string(c.beta2));
  if (!finite(c.eps) || c.eps <= 0)
    return bad("--eps", "must be > 0, got " + std::to_string(c.eps));
  if (c.lrSchedule != "constant" && c.lrSchedule != "step" && c.lrSchedule != "cosine")
    return bad("--lr-schedule",
               "unknown schedule '" + c.lrSchedule + "' (known: constant, step, cosine)");
  if (c.warmupSteps < 0)
    return bad("--warmup-steps", "must be >= 0");
  if (c.lrSchedule == "step" && c.stepSize < 1)
    return bad("--step-size", "must be >= 1 with --lr-schedule step");
  if (!finite(c.gamma) || c.gamma <= 0)
    return bad("--gamma", "must be > 0");
  if (c.lrSchedule == "cosine" && c.totalSteps <= c.warmupSteps)
    return bad("--total-steps", "--lr-schedule cosine needs --total-steps greater than "
                                "--warmup-steps (" +
                                    std::to_string(c.warmupSteps) + "), got " +
                                    std::to_string(c.totalSteps));
  if (!finite(c.minLr) || c.minLr < 0)
    return bad("--min-lr", "must be >= 0");
  if (!finite(c.clipGradNorm) || c.clipGradNorm < 0)
    return bad("--clip-grad-norm", "must be >= 0 (0 turns clipping off)");
  if (c.gradAccumSteps < 1 || c.gradAccumSteps > (int64_t{1} << 20))
    return bad("--grad-accum-steps", "must be in [1, 1048576], got " +
                                         std::to_string(c.gradAccumSteps));
  if (c.batchSize < 1)
    return bad("--batch-size", "a training plan needs --batch-size B (B >= 1)");
  if (c.batchSize > (int64_t{1} << 31) || c.batchSize * c.gradAccumSteps > (int64_t{1} << 40))
    return bad("--batch-size", "batch size x accumulation steps " + std::to_string(c.batchSize) +
                                   " x " + std::to_string(c.gradAccumSteps) + " is too large");
  if (c.dataParallel() < 0 || c.dataParallel() > 65536)
    return bad("--strategy", "dp=N needs N in [1, 65536], got " + std::to_string(c.dataParallel()));
  if (c.dataParallel() > 1 && c.batchSize % c.dataParallel() != 0)
    return bad("--batch-size",
               "the global batch " + std::to_string(c.batchSize) +
                   " does not split evenly over " +
                   (c.mesh.hasParameterHost()
                        ? "the " + std::to_string(c.dataParallel()) + " " +
                              (c.mesh.psServers ? "workers" : "devices") + " of " + c.mesh.text()
                        : "dp=" + std::to_string(c.dataParallel()) + " ranks") +
                   " (use a multiple of " + std::to_string(c.dataParallel()) + ")");
  if (c.mesh.pp > 1 && c.batchSize % (c.mesh.dp * c.mesh.microbatches) != 0)
    return bad("--batch-size",
               "the global batch " + std::to_string(c.batchSize) + " does not split evenly into " +
                   std::to_string(c.mesh.microbatches) + " micro-batches on each of dp=" +
                   std::to_string(c.mesh.dp) + " replicas (use a multiple of " +
                   std::to_string(c.mesh.dp * c.mesh.microbatches) + ")");
  if (!finite(c.bucketMb) || c.bucketMb <= 0 || c.bucketMb > 65536)
    return bad("--bucket-mb", "must be in (0, 65536] MiB, got " + std::to_string(c.bucketMb));
  for (const std::string &cut : c.ppCuts)
    if (cut.empty())
      return bad("--pp-cuts", "has an empty name");
  if (!c.ppCuts.empty() && c.mesh.pp < 2)
    return bad("--pp-cuts", "applies to --strategy pp=S (S >= 2)");
  if (!c.ppCuts.empty() && static_cast<int64_t>(c.ppCuts.size()) != c.mesh.stages() - 1)
    return bad("--pp-cuts", "names " + std::to_string(c.ppCuts.size()) +
                                " boundaries; --strategy pp=" + std::to_string(c.mesh.pp) +
                                (c.mesh.virtualStages > 1
                                     ? " with virtual-stages=" +
                                           std::to_string(c.mesh.virtualStages)
                                     : std::string()) +
                                " needs " + std::to_string(c.mesh.stages() - 1));
  if (c.staleness < -1 || c.staleness > 1000000)
    return bad("--staleness", "must be -1 (unbounded, asynchronous) or a step count in [0, "
                              "1000000], got " + std::to_string(c.staleness));
  if (c.staleness != -1 && c.mesh.psServers == 0)
    return bad("--staleness", "applies to --strategy ps=S:W");
  if (c.asyncRule != "aggregate" && c.asyncRule != "scaled" && c.asyncRule != "staleness-lr")
    return bad("--async-rule",
               "must be scaled, aggregate or staleness-lr, got '" + c.asyncRule + "'");
  if (c.asyncRule != "scaled" && c.mesh.psServers == 0)
    return bad("--async-rule", "applies to --strategy ps=S:W");
  if (c.psMinShardBytes < 1024 || c.psMinShardBytes > (int64_t{1} << 40))
    return bad("--ps-min-shard-bytes", "must be in [1024, 2^40], got " +
                                           std::to_string(c.psMinShardBytes));
  if (c.mesh.hasParameterHost()) {
    const std::string strategy = "--strategy " + c.mesh.text();
    // The host applies each parameter's update on its own: a global gradient norm would need
    // every server's gradients first.
    if (c.clipGradNorm > 0)
      return bad("--clip-grad-norm", "is not supported with " + strategy +
                                         " (the servers update their shards independently)");
    if (c.gradAccumSteps > 1)
      return bad("--grad-accum-steps", "is not supported with " + strategy +
                                           " (a worker pushes one gradient per step)");
    if (c.syncBatchNorm)
      return bad("--sync-batchnorm", "applies to --strategy dp=N, not " + strategy);
  }
  if (c.syncBatchNorm && c.dataParallel() == 0)
    return bad("--sync-batchnorm", "applies to --strategy dp=N");
  if (c.sequenceParallel && (c.mesh.single || c.mesh.tp < 2))
    return bad("--sequence-parallel", "splits tensor-parallel regions: it needs --strategy "
                                      "with tp > 1, not " +
                                          (c.mesh.single ? std::string("single") : c.mesh.text()));
  if (c.precision != "fp32" && c.precision != "bf16" && c.precision != "fp16")
    return bad("--precision", "unknown precision '" + c.precision + "' (known: fp32, bf16, fp16)");
  if (c.precision != "fp32" && c.mesh.hasParameterHost())
    return bad("--precision", c.precision + " is not supported with --strategy " + c.mesh.text() +
                                  " yet (the workers' programs are built without the "
                                  "mixed-precision pass); use fp32");
  DTC_RETURN_IF_ERROR(validateLossScale(c));
  if (c.zero < 0 || c.zero > 2)
    return bad("--zero", "must be 0 (off), 1 (optimizer state sharded) or 2 (gradients too), got " +
                             std::to_string(c.zero));
  if (c.zero > 0) {
    if (c.dataParallel() == 0 || c.mesh.hasParameterHost())
      return bad("--zero", "shards over data-parallel ranks: it needs --strategy dp=N");
    if ((c.mesh.pp > 1 || c.mesh.tp > 1) && c.mesh.dp < 2)
      return bad("--zero",
                 "shards over data-parallel ranks: --strategy " + c.mesh.text() + " has dp=1");
  }
  if (c.bucketMb != kDefaultBucketMb && c.dataParallel() == 0)
    return bad("--bucket-mb", "applies to --strategy dp=N");
  if (c.lrSchedule == "cosine" && c.minLr > c.lr)
    return bad("--min-lr", "must not exceed --lr with --lr-schedule cosine");
  if (c.momentum != 0 && c.optimizer != "sgd")
    return bad("--momentum", "applies to --optimizer sgd (Adam's moments are set by --betas)");
  if (c.labelName.empty())
    return bad("--label-name", "must not be empty");
  if (c.freeze.size() > kMaxFreezePatternChars)
    return bad("--freeze", "the regular expression is " + std::to_string(c.freeze.size()) +
                               " characters long; at most " +
                               std::to_string(kMaxFreezePatternChars) + " are accepted");
  if (!c.freeze.empty()) {
    auto matcher = passes::compileFreezePattern(c.freeze);
    if (!matcher)
      return matcher.status();
  }
  return Status::ok();
}

Status runTrainingPasses(ir::Graph &graph, TrainingConfig &cfg, Diagnostics &diags, bool verifyEach,
                         const passes::PassManagerOptions &report) {
  passes::PassManagerOptions pm = report;
  pm.verifyEach = verifyEach;
  // Names dtc:: are the runtime-fed inputs of training plans.
  for (const ir::Value *v : graph.values())
    if (v->name().rfind("dtc::", 0) == 0)
      return Status::error("value '" + v->name() + "'",
                           "names starting with 'dtc::' are reserved for dtc's runtime inputs; "
                           "rename it in the model");
  // The batch size must be the one the plan binds: a model exported with a fixed batch keeps it.
  for (const ir::Value *v : graph.inputs())
    if (!v->isInitializer() && v->shape().hasRank() && v->shape().rank() > 0 &&
        v->shape()[0].isStatic() && v->shape()[0].value() != cfg.rankBatchSize()) {
      const int64_t ranks = std::max<int64_t>(1, cfg.dataParallel());
      return Status::error(
          "input '" + v->name() + "'",
          "has a fixed leading (batch) dim of " + std::to_string(v->shape()[0].value()) +
              ", but --batch-size is " + std::to_string(cfg.batchSize) +
              (ranks > 1 ? " (" + std::to_string(cfg.rankBatchSize()) + " per rank)" : "") +
              "; re-export the model with a dynamic batch axis or use --batch-size " +
              std::to_string(v->shape()[0].value() * ranks));
    }
  return runPipeline(graph, cfg, diags, pm);
}

namespace {

Status runPipeline(ir::Graph &graph, TrainingConfig &cfg, Diagnostics &diags,
                   const passes::PassManagerOptions &pm) {
  passes::PassContext ctx;
  ctx.training = &cfg;
  std::vector<const char *> pipeline = {"training-mode", "attach-loss"};
  // Parameter servers and central storage: the workers' graph ends with the gradients; the
  // optimizer runs on the parameter host (lowering builds its programs).
  if (cfg.mesh.hasParameterHost())
    pipeline = {"training-mode", "attach-loss", "autodiff"};
  if (!cfg.mesh.hasParameterHost()) {
    if (cfg.mesh.tp > 1 || !cfg.tpShard.empty())
      pipeline.push_back("tensor-parallel");
    if (cfg.mesh.pp > 1)
      pipeline.push_back("pipeline");
    pipeline.push_back("mixed-precision");
    pipeline.push_back("autodiff");
    // A pipeline or tensor-parallel mesh without data parallelism (dp=1) needs no gradient
    // all-reduce.
    if (cfg.dataParallel() > 0 && ((cfg.mesh.pp == 1 && cfg.mesh.tp == 1) || cfg.mesh.dp > 1))
      pipeline.push_back("data-parallel");
    pipeline.push_back("optimizer");
    if (cfg.mesh.pp > 1)
      pipeline.push_back("pipeline-comm");
  }
  passes::PassManager manager(pm);
  Status result = Status::ok();
  for (const char *name : pipeline) {
    std::unique_ptr<passes::Pass> p = passes::createPassByName(name);
    if (!p) {
      result = Status::error(std::string("pass '") + name + "' is not available in this build");
      break;
    }
    manager.add(std::move(p));
  }
  if (result.isOk())
    result = manager.run(graph, ctx);
  for (const Diagnostic &d : ctx.diags.items()) {
    if (d.severity == Severity::kWarning)
      diags.warning("", d.message);
    else
      diags.note("", d.message);
  }
  // One value per channel has variance 0: BatchNormalization then outputs its shift alone and
  // nothing before it learns. PyTorch refuses it ("Expected more than 1 value per channel when
  // training"); so does dtc, for the per-rank batch unless statistics are synchronized.
  if (result.isOk())
    for (const ir::Node *n : graph.nodes()) {
      if (n->domain() != ir::kDtcDomain || n->opType() != "BatchNormTraining" ||
          n->attrInt("sync", 0) != 0)
        continue;
      const ir::Shape &x = n->input(0)->shape();
      auto count = x.numElements();
      if (x.rank() >= 2 && x[1].isStatic() && count && *count == x[1].value())
        return Status::error(
            "node '" + n->name() + "' (BatchNormalization)",
            "input " + n->input(0)->type().str() +
                " has 1 value per channel: batch statistics need at least 2 (a --batch-size of "
                "at least 2 per rank" +
                (cfg.dataParallel() > 1 ? std::string(", or --sync-batchnorm") : "") + ")");
    }
  if (result.isOk() &&
      std::none_of(graph.training().gradients.begin(), graph.training().gradients.end(),
                   [](ir::Value *g) { return g; }))
    return Status::error("training", "no parameter gets a gradient (the loss depends on none, or "
                                     "--freeze matches all of them): nothing to train");
  return result;
}

} // namespace

} // namespace dtc::driver
