// dtc-run: executes a plan made by dtc-compile (DESIGN.md sections 8-9) on the device its ranks
// name (the CPU, or a GPU: --device cuda plans in a build with DTC_ENABLE_CUDA). Inference
// plans: `dtc-run plan.dtc --infer --inputs in.npz --outputs out.npz`; training plans:
// `dtc-run plan.dtc --data train.npz [--epochs E | --steps S] ...` (runtime/Trainer.h).
// Exit codes: 0 ok, 1 error (printed as "error: <where>: <what>"), 2 usage.
#include "compiler/plan/Plan.h"
#include "compiler/support/FileIO.h"
#include "runtime/Checkpoint.h"
#include "runtime/Executor.h"
#include "runtime/Trace.h"
#include "runtime/Trainer.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/Launcher.h"
#include "runtime/io/Npy.h"
#include "runtime/ps/CentralStorage.h"
#include "runtime/ps/Cluster.h"
#include "runtime/ps/LocalCluster.h"
#include "runtime/ps/Service.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <tuple>
#include <sys/resource.h>
#include <unistd.h>

namespace {

// Messages carry names from files (arrays, nodes): control characters are escaped so that none
// can start a line of its own.
int fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", dtc::escapeControl(message).c_str());
  return 1;
}

int usage(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", dtc::escapeControl(message).c_str());
  return 2;
}

/// The plan file, checked before it is parsed: a regular file within protobuf's 2 GiB.
dtc::Expected<dtc::plan::Plan> readPlan(const std::string &path) {
  DTC_RETURN_IF_ERROR(dtc::checkInputFile(path, "the plan", dtc::kMaxPlanFileBytes));
  return dtc::plan::readPlanFile(path);
}

/// What rank `rank` of a training job reads: the plan's header, its own program in full, the
/// others as summaries (plan::readPlanForRank), and the file's fingerprint.
dtc::Expected<dtc::plan::Plan> readPlanForRank(const std::string &path, int rank,
                                               std::string &fingerprint) {
  DTC_RETURN_IF_ERROR(dtc::checkInputFile(path, "the plan", dtc::kMaxPlanFileBytes));
  return dtc::plan::readPlanForRank(path, rank, &fingerprint);
}

/// The plan's header alone (every field but its programs, which are not parsed).
dtc::Expected<dtc::plan::Plan> readPlanHeader(const std::string &path) {
  DTC_RETURN_IF_ERROR(dtc::checkInputFile(path, "the plan", dtc::kMaxPlanFileBytes));
  DTC_ASSIGN_OR_RETURN(std::string bytes,
                       dtc::readInputFile(path, "the plan", dtc::kMaxPlanFileBytes));
  DTC_ASSIGN_OR_RETURN(dtc::plan::PlanFile file, dtc::plan::splitPlan(std::move(bytes), path));
  return std::move(file.header);
}

/// `dtc-run PLAN --validate [--rank R]`: reads and validates the plan as dtc-run would before
/// running it (every kernel call checked against the kernels of the plan's device kind, and a
/// training plan's training checks), then prints one line. Without --rank every program is read
/// and checked in full; with it, what rank R does at start: its own program in full, the others
/// as summaries. Timing this is timing a rank's start (tools/bench/compile_bench.py).
int validateOnly(const std::string &path, int rank) {
  auto peakRssBytes = [] {
    struct rusage u {};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) * 1024; // Linux: KiB
  };
  const double rss0 = peakRssBytes();
  const auto t0 = std::chrono::steady_clock::now();
  std::string fingerprint;
  // rank -1: every program in full.
  auto plan = readPlanForRank(path, rank, fingerprint);
  if (!plan)
    return fail(plan.status().message());
  if (rank >= plan->world_size())
    return usage("--rank " + std::to_string(rank) + ": " + path + " is a plan for " +
                 std::to_string(plan->world_size()) + " rank(s)");
  if (plan->mode() == dtc::plan::MODE_TRAINING && !plan->has_parameter_host())
    if (dtc::Status s = dtc::rt::checkTrainingPlan(*plan, path); !s.isOk())
      return fail(s.message());
  if (dtc::Status s = dtc::rt::validateRunnablePlan(*plan, path); !s.isOk())
    return fail(s.message());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int summaries = 0;
  for (const dtc::plan::RankProgram &p : plan->programs())
    summaries += p.summary();
  // The peak RSS above what the process held before reading: the plan's own cost (the libraries
  // a dtc-run loads, CUDA's among them, are not counted).
  std::printf("%s: valid, %d rank(s), %d program(s)%s, fingerprint %s; read and validated in "
              "%.3f s, peak RSS +%.1f MiB\n",
              path.c_str(), plan->world_size(), plan->programs_size(),
              rank < 0 ? ""
                       : (" (as rank " + std::to_string(rank) + " reads it: " +
                          std::to_string(summaries) + " read as summaries)")
                             .c_str(),
              fingerprint.c_str(), seconds, (peakRssBytes() - rss0) / (1 << 20));
  return 0;
}

/// The files a run reads, for the identity checks against its outputs: the plan, the model it
/// names (relative to the plan's folder, or the copy next to the plan) or --model, and the
/// data files.
std::vector<dtc::NamedPath> runInputs(const dtc::plan::Plan &plan, const std::string &planPath,
                                      const std::string &modelPath,
                                      std::vector<dtc::NamedPath> data) {
  namespace fs = std::filesystem;
  std::vector<dtc::NamedPath> in = {{"the plan", planPath}};
  if (!modelPath.empty()) {
    in.push_back({"--model", modelPath});
  } else if (!plan.model().path().empty()) {
    fs::path named = plan.model().path();
    fs::path dir = fs::path(planPath).parent_path();
    in.push_back({"the plan's model", (named.is_relative() ? dir / named : named).string()});
    in.push_back({"the plan's model", (dir / named.filename()).string()});
  }
  for (dtc::NamedPath &d : data)
    if (!d.path.empty())
      in.push_back(std::move(d));
  return in;
}

/// Trains `plan`; with several ranks (or collectives) on a communicator: the ranks first agree
/// that they run one plan of the job's size, and an error on one rank ends the whole job.
int runTraining(dtc::plan::Plan plan, dtc::rt::TrainOptions &train, double timeout,
                const std::string &tracePath) {
  // Plan-level fields only: train() validates the plan before anything reads its programs. A
  // plan with communicator groups (dp=1 too) runs its collectives on a communicator.
  const int launched = dtc::rt::launcherWorldSize();
  if (plan.world_size() == 1 && plan.groups_size() == 0 && launched == 1) {
    std::unique_ptr<dtc::rt::Tracer> tracer;
    if (!tracePath.empty()) {
      tracer = std::make_unique<dtc::rt::Tracer>(0);
      train.tracer = tracer.get();
    }
    dtc::Status s = dtc::rt::train(std::move(plan), train);
    if (s.isOk() && tracer)
      s = tracer->write(tracePath, nullptr);
    return s.isOk() ? 0 : fail(s.message());
  }
  std::unique_ptr<dtc::rt::Tracer> tracer;
  if (!tracePath.empty())
    tracer = std::make_unique<dtc::rt::Tracer>(dtc::rt::launcherRank());
  dtc::rt::CommOptions co;
  co.timeoutSeconds = timeout;
  co.tracer = tracer.get();
  auto comm = dtc::rt::Communicator::createMpi(co);
  if (!comm)
    return fail(comm.status().message());
  dtc::rt::Communicator &c = **comm;
  const std::string rankText = "rank " + std::to_string(c.rank());
  // Messages name the rank once: most runtime errors do already.
  auto failOnRank = [&](const dtc::Status &st) {
    return fail(st.message().rfind("rank ", 0) == 0 ? st.message()
                                                    : rankText + ": " + st.message());
  };
  // The plan was read for the launcher's rank (its environment); a launcher whose variables
  // dtc-run does not know gives 0 on every rank: read it again for the communicator's rank.
  if (c.rank() < plan.ranks_size() && plan.ranks(c.rank()).program() >= 0 &&
      plan.ranks(c.rank()).program() < plan.programs_size() &&
      plan.programs(plan.ranks(c.rank()).program()).summary()) {
    auto again = dtc::plan::readPlanForRank(train.planPath, c.rank(), &train.planFingerprint);
    if (!again)
      return failOnRank(again.status());
    plan = again.takeValue();
  }
  if (train.planFingerprint.empty())
    train.planFingerprint = dtc::plan::fingerprint(plan);
  dtc::Status same = c.checkSameJob(train.planFingerprint, plan.world_size(), train.planPath);
  if (!same.isOk())
    return failOnRank(same); // every rank reached the same verdict
  if (tracer) {
    dtc::Status b = c.barrier("trace start");
    if (!b.isOk()) {
      failOnRank(b);
      c.abortJob(1);
    }
    tracer->setOrigin();
  }
  train.comm = &c;
  train.tracer = tracer.get();
  if (c.rank() != 0) {
    train.progress = nullptr;
    train.profile = nullptr;
  }
  dtc::Status s = dtc::rt::train(std::move(plan), train);
  if (s.isOk() && tracer)
    s = tracer->write(tracePath, &c);
  if (!s.isOk()) {
    failOnRank(s);
    // Other ranks may wait in a collective for this one: end the whole job.
    c.abortJob(1);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"dtc-run: run a dtc plan"};
  app.set_version_flag("--version", "dtc-run 0.1.0");
  std::string planPath, inputsPath, outputsPath, modelPath;
  bool infer = false, profile = false;
  int threads = 0, repeat = 1, warmup = 0;
  app.add_option("plan", planPath, "plan file written by dtc-compile")->required();
  app.add_flag("--infer", infer, "run the forward pass on --inputs and write --outputs");
  bool validate = false;
  int validateRank = -1;
  CLI::Option *validateOpt = app.add_flag(
      "--validate", validate,
      "read and validate the plan (every program, every kernel call; cross-rank checks), print "
      "its fingerprint and exit");
  app.add_option("--rank", validateRank,
                 "with --validate: read and validate the plan as rank R does at start (its own "
                 "program in full, the others without their instructions)")
      ->check(CLI::Range(0, 1 << 30))
      ->needs(validateOpt);
  app.add_option("--inputs", inputsPath, ".npz (or .npy) file with one array per graph input");
  app.add_option("--outputs", outputsPath,
                 ".npz file to write the graph outputs to (optional: without it nothing is "
                 "written, for timing runs)");
  app.add_option("--model", modelPath,
                 "read the weights from this model file instead of the one the plan names (its "
                 "checksum must match the plan's)");
  app.add_option("--threads", threads,
                 "CPU threads for the kernels (0, the default: OpenMP's default, one per core "
                 "or OMP_NUM_THREADS)")
      ->check(CLI::Range(0, 4096));
  int cudaWorkspaceMb = 256;
  app.add_option("--cuda-workspace-mb", cudaWorkspaceMb,
                 "CUDA plans: the most scratch memory, in MiB, a cuDNN kernel may use when it "
                 "chooses its algorithm (default 256)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--profile", profile,
               "print the time of every kernel (sorted), the arena and the peak memory to stderr");
  app.add_option("--repeat", repeat,
                 "run the forward pass this many times and print latency statistics (benchmarks)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", warmup, "untimed runs before the timed ones")
      ->check(CLI::Range(0, 1000000));

  // Training plans.
  dtc::rt::TrainOptions train;
  int64_t seed = 0;
  bool shuffle = false, noShuffle = false;
  CLI::Option *dataOpt = app.add_option(
      "--data", train.dataPath,
      "train a training plan on this .npz (one array per data input of the plan, and the "
      "label; axis 0 counts samples)");
  app.add_option("--val-data", train.valDataPath,
                 ".npz validated on at the end of every epoch (the plan's forward with batch "
                 "statistics; parameters are left unchanged)");
  CLI::Option *epochsOpt = app.add_option("--epochs", train.epochs, "epochs to train (default 1)")
                               ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  CLI::Option *stepsOpt =
      app.add_option("--steps", train.steps,
                     "optimizer steps in all (a resumed run continues up to this total)")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  epochsOpt->excludes(stepsOpt);
  CLI::Option *seedOpt =
      app.add_option("--seed", seed, "seed of the data order and the plan's RNG (default 0)")
          ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  CLI::Option *shuffleOpt =
      app.add_flag("--shuffle", shuffle, "visit the samples in a new order every epoch (default)");
  CLI::Option *noShuffleOpt =
      app.add_flag("--no-shuffle", noShuffle, "visit the samples in file order");
  shuffleOpt->excludes(noShuffleOpt);
  app.add_option("--log", train.logPath,
                 "write JSON lines (one per step and per epoch) to this file");
  CLI::Option *ckptDirOpt =
      app.add_option("--checkpoint-dir", train.checkpointDir,
                     "write checkpoints (ckpt-<step>.manifest.json and one "
                     "ckpt-<step>.shard-<program>.npz per program) to this folder, created if "
                     "missing");
  app.add_option("--checkpoint-every", train.checkpointEvery,
                 "checkpoint every K steps (default: at the end of every epoch); the end of the "
                 "run is always checkpointed")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->needs(ckptDirOpt);
  app.add_flag("--resume", train.resume,
               "continue from the newest checkpoint in --checkpoint-dir (an error when there is "
               "none)")
      ->needs(ckptDirOpt);
  app.add_option("--export", train.exportPath,
                 "write the source model with the trained weights to this .onnx file");
  app.add_option("--dump-gradients", train.dumpGradientsPath,
                 "write the last step's gradients (by initializer name) to this .npz");
  app.add_option("--save-params", train.saveParamsPath,
                 "write the trained parameters (by initializer name) to this .npz");
  app.add_option("--print-every", train.printEvery,
                 "progress line every N steps when stderr is not a terminal (default 50)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_flag("--allow-nonfinite-loss", train.allowNonFiniteLoss,
               "go on training when a step's loss is NaN or infinite (default: stop with an "
               "error naming the step)");
  // Data-parallel plans (dtc-compile --strategy dp=N).
  int nproc = 0;
  double timeout = 60;
  std::string tracePath;
  app.add_option("--nproc", nproc,
                 "start N local ranks with mpirun (runs `mpirun -n N dtc-run ...`; N must be "
                 "the plan's dp size)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--timeout", timeout,
                 "seconds after which a rank that died or stops answering ends the job with an "
                 "error naming it (default 60)")
      ->check(CLI::Range(0.1, 1e6));
  app.add_option("--trace", tracePath,
                 "write a Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev) of every "
                 "rank's kernels and communication to this .json file");
  // Parameter-server plans (dtc-compile --strategy ps=S:W).
  std::string clusterPath, task, tokenPath;
  bool localCluster = false, quiet = false;
  dtc::rt::ps::ServiceOptions service;
  app.add_flag("--local-cluster", localCluster,
               "ps=S:W plans: start the S servers and W workers on this machine (free loopback "
               "ports, a fresh job token)");
  app.add_option("--cluster", clusterPath,
                 "ps=S:W plans: the cluster as TF_CONFIG JSON ({\"cluster\": {\"worker\": [...], "
                 "\"ps\": [...]}}); default: the TF_CONFIG environment variable");
  app.add_option("--task", task, "ps=S:W plans: this process's task, worker:I or ps:I (default: "
                                 "the cluster JSON's \"task\")");
  app.add_option("--job-token-file", tokenPath,
                 "ps=S:W plans: the job's secret (at least 16 bytes); every call must carry it");
  app.add_option("--heartbeat-timeout", service.heartbeatTimeoutSeconds,
                 "ps=S:W servers: a worker silent for this many seconds is lost and training goes "
                 "on without it (default 10)")
      ->check(CLI::Range(0.1, 1e6));
  app.add_option("--tls-cert", service.tlsCert, "ps=S:W: this task's PEM certificate (TLS)");
  app.add_option("--tls-key", service.tlsKey, "ps=S:W: this task's PEM private key (TLS)");
  app.add_option("--tls-ca", service.tlsCa,
                 "ps=S:W: the PEM CA certificate that signed every task's (TLS on all calls)");
  app.add_flag("--quiet", quiet, "print no progress (errors and warnings only)");
  app.add_option("--step-delay", train.stepDelaySeconds,
                 "sleep this many seconds after every step: a slow worker, for fault-injection "
                 "tests and benchmarks (default 0)")
      ->check(CLI::Range(0.0, 3600.0));
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
  for (const char *flag :
       {"--inputs", "--outputs", "--model", "--data", "--val-data", "--log", "--checkpoint-dir",
        "--export", "--dump-gradients", "--save-params", "--trace"})
    if (app.count(flag) && app[flag]->as<std::string>().empty())
      return usage(std::string(flag) + ": empty file name");
  if (planPath.empty())
    return usage("plan: empty file name");
  if (validate) {
    for (const CLI::Option *o : app.get_options())
      if (o->count() && o != validateOpt && o->get_name() != "plan" && o->get_name() != "--rank")
        return usage(o->get_name() + ": --validate takes the plan (and --rank) only");
    return validateOnly(planPath, validateRank);
  }
  std::unique_ptr<dtc::rt::ParameterClient> psClient; // a parameter-server worker's
  if (localCluster || !clusterPath.empty() || !task.empty() || std::getenv("TF_CONFIG")) {
    auto plan = readPlan(planPath);
    if (!plan)
      return fail(plan.status().message());
    const bool ps = plan->has_parameter_host() && plan->parameter_host().kind() ==
                                                      dtc::plan::ParameterHostInfo::PARAMETER_SERVERS;
    if (!ps && (localCluster || !clusterPath.empty() || !task.empty()))
      return usage(planPath + ": --local-cluster, --cluster and --task run parameter-server "
                              "plans (dtc-compile --strategy ps=S:W); this plan is --strategy " +
                   plan->mesh().strategy());
    if (ps) {
      if (nproc > 0)
        return usage("--nproc starts MPI ranks; a parameter-server plan runs with "
                     "--local-cluster, or each task with --cluster and --task");
      const auto &host = plan->parameter_host();
      if (localCluster) {
        if (!clusterPath.empty() || !task.empty() || !tokenPath.empty())
          return usage("--local-cluster makes its own cluster, tasks and job token: drop "
                       "--cluster, --task and --job-token-file");
        if (dataOpt->empty())
          return usage("--local-cluster trains: give --data TRAIN.npz");
        std::vector<std::string> args;
        for (int i = 1; i < argc; ++i)
          if (std::string(argv[i]) != "--local-cluster")
            args.push_back(argv[i]);
        std::error_code ec;
        const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
        auto code = dtc::rt::ps::runLocalCluster(ec ? std::string(argv[0]) : self, args,
                                                 host.servers_size(), host.workers());
        if (!code)
          return fail(code.status().message());
        return *code;
      }
      std::string text;
      std::string where = "TF_CONFIG";
      if (!clusterPath.empty()) {
        auto read = dtc::readInputFile(clusterPath, "--cluster", 1 << 20);
        if (!read)
          return fail(read.status().message());
        text = *read;
        where = clusterPath;
      } else if (const char *env = std::getenv("TF_CONFIG")) {
        text = env;
      } else {
        return usage("a parameter-server task needs its cluster: --cluster FILE or TF_CONFIG");
      }
      auto cluster = dtc::rt::ps::parseClusterJson(text, where);
      if (!cluster)
        return fail(cluster.status().message());
      if (!task.empty())
        if (dtc::Status t = dtc::rt::ps::parseTask(task, *cluster); !t.isOk())
          return usage(t.message());
      if (cluster->taskType.empty())
        return usage("which task is this process? --task worker:I or ps:I (or \"task\" in " +
                     where + ")");
      if (tokenPath.empty())
        return usage("a parameter-server task needs --job-token-file (the job's secret)");
      auto token = dtc::rt::ps::readJobToken(tokenPath);
      if (!token)
        return fail(token.status().message());
      service.token = *token;
      if (service.tlsCa.empty() != service.tlsCert.empty() ||
          service.tlsCa.empty() != service.tlsKey.empty())
        return usage("TLS needs all of --tls-cert, --tls-key and --tls-ca");
      service.timeoutSeconds = timeout;
      // The servers keep the training state: --checkpoint-dir is theirs (workers hold none).
      service.checkpointDir = train.checkpointDir;
      train.checkpointDir.clear();
      if (train.resume)
        return usage("--resume: a parameter server restores its checkpoint in --checkpoint-dir "
                     "by itself when restarted; drop --resume");
      service.executor.planPath = planPath;
      service.executor.modelPath = modelPath;
      service.executor.threads = threads;
      const std::string who = cluster->taskType + ":" + std::to_string(cluster->taskIndex);
      if (cluster->taskType == "ps") {
        // The training options of the command line are the workers' (--local-cluster passes
        // one command line to every task): a server ignores them.
        dtc::Status s = dtc::rt::ps::runServer(*plan, *cluster, service);
        return s.isOk() ? 0 : fail(s.message().rfind(who, 0) == 0 ? s.message()
                                                                   : who + ": " + s.message());
      }
      if (dataOpt->empty())
        return usage(who + " is a worker: give --data TRAIN.npz");
      auto client = dtc::rt::ps::createClient(*plan, *cluster, service);
      if (!client)
        return fail(who + ": " + client.status().message());
      psClient = std::move(*client);
      train.parameters = psClient.get();
      train.workerRank = cluster->taskIndex;
    }
  }
  if (nproc > 0) {
    // Re-run this command line under mpirun, without --nproc.
    if (dtc::rt::launcherWorldSize() > 1)
      return usage("--nproc: this dtc-run already runs as one of " +
                   std::to_string(dtc::rt::launcherWorldSize()) +
                   " ranks started by mpirun; drop --nproc");
    if (dataOpt->empty())
      return usage("--nproc starts the ranks of a data-parallel training plan (with --data)");
    auto plan = readPlanHeader(planPath);
    if (!plan)
      return fail(plan.status().message());
    if (plan->has_parameter_host())
      return usage("--nproc starts MPI ranks; " + planPath + " is a --strategy " +
                   plan->mesh().strategy() +
                   " plan (ps: --local-cluster or --cluster/--task; cs: run it as it is)");
    if (plan->world_size() != nproc)
      return usage("--nproc " + std::to_string(nproc) + ": " + planPath +
                   (plan->world_size() == 1 && plan->groups_size() == 0
                        ? " is a single-device plan (compile it with --strategy dp=" +
                              std::to_string(nproc) + " to train on " + std::to_string(nproc) +
                              " ranks)"
                        : " is a plan for " + std::to_string(plan->world_size()) +
                              " rank(s) (--strategy " + plan->mesh().strategy() + ")"));
    // launchLocal drops --nproc from the arguments.
    auto code = dtc::rt::launchLocal(nproc, std::vector<std::string>(argv + 1, argv + argc));
    if (!code)
      return fail(code.status().message());
    return *code;
  }
  const bool training = !dataOpt->empty();
  if (!training)
    for (const char *flag : {"--timeout", "--trace"})
      if (app.count(flag))
        return usage(std::string(flag) + " is a training option (with --data)");
  if (infer && training)
    return usage("--infer runs inference plans and --data trains training plans: give one");
  if (!infer && !training)
    return usage("pass --infer --inputs IN.npz [--outputs OUT.npz] (inference plans) or --data "
                 "TRAIN.npz (training plans)");
  if (training) {
    for (const char *flag : {"--inputs", "--outputs", "--repeat", "--warmup"})
      if (app.count(flag))
        return usage(std::string(flag) + " is an --infer option; training takes --data");
    // This rank's program in full, the others without their instructions.
    auto plan = readPlanForRank(planPath, dtc::rt::launcherRank(), train.planFingerprint);
    if (!plan)
      return fail(plan.status().message());
    if (plan->mode() != dtc::plan::MODE_TRAINING)
      return usage(planPath + ": an inference plan: run it with --infer --inputs IN.npz (compile "
                              "without --inference for a training plan)");
    // Inputs are regular files (a FIFO would block, /dev/zero never ends); outputs never name
    // one of them (compared by device and inode, so links and other spellings are caught).
    for (const auto &[flag, path, limit] :
         {std::tuple<const char *, std::string, uint64_t>{"--data", train.dataPath,
                                                          dtc::kMaxArrayFileBytes},
          {"--val-data", train.valDataPath, dtc::kMaxArrayFileBytes},
          {"--model", modelPath, dtc::kMaxModelFileBytes}})
      if (!path.empty())
        if (dtc::Status s = dtc::checkInputFile(path, flag, limit); !s.isOk())
          return fail(s.message());
    dtc::Status distinct = dtc::checkDistinctFiles(
        {{"--log", train.logPath},
         {"--trace", tracePath},
         {"--export", train.exportPath},
         {"--save-params", train.saveParamsPath},
         {"--dump-gradients", train.dumpGradientsPath}},
        runInputs(*plan, planPath, modelPath,
                  {{"--data", train.dataPath}, {"--val-data", train.valDataPath}}));
    if (!distinct.isOk())
      return fail(distinct.message());
    // What checkpoint writes cut short (kill -9) leave behind (temporaries, shards without a
    // manifest) is removed before anything else looks at the folder, by rank 0 alone (the other
    // ranks wait for it at start-up before they read or write there).
    if (!train.checkpointDir.empty() && dtc::rt::launcherRank() == 0) {
      dtc::Status c = dtc::rt::removeStaleCheckpointFiles(train.checkpointDir);
      if (!c.isOk())
        return fail(c.message());
    }
    train.planPath = planPath;
    train.modelPath = modelPath;
    train.threads = threads;
    train.cudaWorkspaceMb = cudaWorkspaceMb;
    train.commTimeoutSeconds = timeout;
    if (profile)
      train.profile = &std::cerr;
    if (!seedOpt->empty())
      train.seed = static_cast<uint64_t>(seed);
    if (shuffle)
      train.shuffle = true;
    if (noShuffle)
      train.shuffle = false;
    train.progress = quiet || (train.parameters && train.workerRank != 0) ? nullptr : stderr;
    train.progressIsTerminal = isatty(fileno(stderr));
    if (!std::isfinite(timeout))
      return usage("--timeout: must be a number of seconds, got " + std::to_string(timeout));
    train.tracePath = tracePath;
    if (plan->has_parameter_host() &&
        plan->parameter_host().kind() == dtc::plan::ParameterHostInfo::CENTRAL_STORAGE) {
      if (!tracePath.empty() || nproc > 0)
        return usage(std::string(nproc > 0 ? "--nproc" : "--trace") +
                     " does not apply to central-storage plans (one process, N devices)");
      dtc::Status s = dtc::rt::ps::trainCentralStorage(*plan, train);
      return s.isOk() ? 0 : fail(s.message());
    }
    if (plan->has_parameter_host() && !train.parameters)
      return usage(planPath + ": a parameter-server plan (--strategy " + plan->mesh().strategy() +
                   "): run it with --local-cluster, or each task with --cluster FILE (or "
                   "TF_CONFIG) and --task worker:I|ps:I");
    if (train.parameters) {
      if (!tracePath.empty())
        return usage("--trace is not supported for parameter-server workers yet");
      dtc::Status s = dtc::rt::train(plan.takeValue(), train);
      return s.isOk() ? 0
                      : fail("worker:" + std::to_string(train.workerRank) + ": " + s.message());
    }
    return runTraining(plan.takeValue(), train, timeout, tracePath);
  }
  for (const char *flag :
       {"--val-data", "--epochs", "--steps", "--seed", "--shuffle", "--no-shuffle", "--log",
        "--checkpoint-dir", "--export", "--dump-gradients", "--save-params", "--print-every",
        "--allow-nonfinite-loss"})
    if (app.count(flag))
      return usage(std::string(flag) + " is a training option (with --data); --infer runs the "
                                       "forward pass only");
  if (inputsPath.empty()) {
    std::fprintf(stderr, "error: --infer needs --inputs IN.npz\n");
    return 2;
  }
  if (outputsPath.size() >= 4 && outputsPath.compare(outputsPath.size() - 4, 4, ".npy") == 0) {
    std::fprintf(stderr,
                 "error: --outputs %s: dtc-run writes an .npz archive (one array per "
                 "output); give a .npz name\n",
                 outputsPath.c_str());
    return 2;
  }

  auto plan = readPlan(planPath);
  if (!plan) {
    std::string message = plan.status().message();
    if (message.find("not a dtc plan") != std::string::npos)
      message += " (dtc-run takes the binary plan written by dtc-compile --inference -o "
                 "PLAN, not an ONNX model or --emit plan-text output)";
    return fail(message);
  }
  if (plan->mode() != dtc::plan::MODE_INFERENCE)
    return usage(planPath + ": a training plan: train it with --data TRAIN.npz (compile with "
                            "--inference for a plan --infer runs)");
  if (plan->world_size() != 1)
    return fail(planPath + ": the plan has " + std::to_string(plan->world_size()) +
                " ranks; --infer runs one-rank plans");

  if (!modelPath.empty())
    if (dtc::Status s = dtc::checkInputFile(modelPath, "--model", dtc::kMaxModelFileBytes);
        !s.isOk())
      return fail(s.message());
  if (dtc::Status s = dtc::checkDistinctFiles(
          {{"--outputs", outputsPath}},
          runInputs(*plan, planPath, modelPath, {{"--inputs", inputsPath}}));
      !s.isOk())
    return fail(s.message());
  // Read the inputs before loading weights, so a bad input file fails fast.
  auto inputs = dtc::rt::readArrays(inputsPath);
  if (!inputs)
    return fail(inputs.status().message());

  dtc::rt::ExecutorOptions opts;
  opts.planPath = planPath;
  opts.modelPath = modelPath;
  opts.threads = threads;
  opts.cudaWorkspaceMb = cudaWorkspaceMb;
  opts.profile = profile;
  auto executor = dtc::rt::Executor::create(plan.takeValue(), opts);
  if (!executor)
    return fail(executor.status().message());
  dtc::rt::Executor &ex = **executor;
  for (const dtc::rt::HostArray &a : *inputs) {
    dtc::Status s = ex.setInput(a);
    if (!s.isOk())
      return fail(inputsPath + ": " + s.message());
  }

  for (int i = 0; i < warmup; ++i) {
    dtc::Status s = ex.run();
    if (!s.isOk())
      return fail(s.message());
  }
  ex.resetProfile(); // --profile reports the timed runs only
  std::vector<double> seconds;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    dtc::Status s = ex.run();
    if (!s.isOk())
      return fail(s.message());
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (repeat > 1) {
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double s : seconds)
      sum += s;
    std::fprintf(stderr, "latency over %d runs: mean %.3f ms, median %.3f ms, min %.3f ms\n",
                 repeat, 1e3 * sum / repeat, 1e3 * sorted[sorted.size() / 2], 1e3 * sorted[0]);
  }
  if (profile)
    ex.profiler().print(std::cerr, ex.arenaBytes());

  if (!outputsPath.empty()) {
    auto outputs = ex.outputs();
    if (!outputs)
      return fail(outputs.status().message());
    dtc::Status s = dtc::rt::writeNpz(outputsPath, *outputs);
    if (!s.isOk())
      return fail(s.message());
  }
  return 0;
}
