// dtc-run: executes a plan made by dtc-compile (DESIGN.md sections 8-9). This version runs
// forward-only plans on the CPU: `dtc-run plan.dtc --infer --inputs in.npz --outputs out.npz`.
// Exit codes: 0 ok, 1 error (printed as "error: <where>: <what>"), 2 usage.
#include "compiler/plan/Plan.h"
#include "runtime/Executor.h"
#include "runtime/io/Npy.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
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
  app.add_option("--inputs", inputsPath, ".npz (or .npy) file with one array per graph input");
  app.add_option("--outputs", outputsPath,
                 ".npz file to write the graph outputs to (optional: without it nothing is "
                 "written, for timing runs)");
  app.add_option("--model", modelPath,
                 "read the weights from this model file instead of the one the plan names (its "
                 "SHA-256 must match the plan's)");
  app.add_option("--threads", threads,
                 "CPU threads for the kernels (0, the default: OpenMP's default, one per core "
                 "or OMP_NUM_THREADS)")
      ->check(CLI::Range(0, 4096));
  app.add_flag("--profile", profile,
               "print the time of every kernel (sorted), the arena and the peak memory to stderr");
  app.add_option("--repeat", repeat,
                 "run the forward pass this many times and print latency statistics (benchmarks)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", warmup, "untimed runs before the timed ones")
      ->check(CLI::Range(0, 1000000));
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
  if (!infer) {
    std::fprintf(stderr, "error: this version of dtc-run runs forward-only plans: pass --infer "
                         "--inputs IN.npz --outputs OUT.npz\n");
    return 2;
  }
  if (inputsPath.empty()) {
    std::fprintf(stderr, "error: --infer needs --inputs IN.npz\n");
    return 2;
  }
  if (outputsPath.size() >= 4 && outputsPath.compare(outputsPath.size() - 4, 4, ".npy") == 0) {
    std::fprintf(stderr, "error: --outputs %s: dtc-run writes an .npz archive (one array per "
                         "output); give a .npz name\n",
                 outputsPath.c_str());
    return 2;
  }

  auto plan = dtc::plan::readPlanFile(planPath);
  if (!plan) {
    std::string message = plan.status().message();
    if (message.find("not a dtc plan") != std::string::npos)
      message += " (dtc-run takes the binary plan written by dtc-compile --inference -o "
                 "PLAN, not an ONNX model or --emit plan-text output)";
    return fail(message);
  }
  if (plan->mode() != dtc::plan::MODE_INFERENCE)
    return fail(planPath + ": not a forward-only plan (compile it with --inference)");
  if (plan->world_size() != 1)
    return fail(planPath + ": the plan has " + std::to_string(plan->world_size()) +
                " ranks; --infer runs one-rank plans");

  // Read the inputs before loading weights, so a bad input file fails fast.
  auto inputs = dtc::rt::readArrays(inputsPath);
  if (!inputs)
    return fail(inputs.status().message());

  dtc::rt::ExecutorOptions opts;
  opts.planPath = planPath;
  opts.modelPath = modelPath;
  opts.threads = threads;
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
