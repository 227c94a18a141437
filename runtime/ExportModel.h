// --export: the source ONNX model with its trained initializers replaced by the values a
// training run ended with, written as a plain binary .onnx file that onnxruntime can load.
#pragma once

#include "compiler/support/Status.h"
#include "runtime/io/Npy.h"

#include <string>
#include <vector>

namespace dtc::rt {

/// Reads the model at `modelPath` (binary or ONNX text), replaces the main graph's initializer
/// named `a.name` by each array `a` (stored as raw_data; typed data fields and external data
/// references are cleared), keeps everything else as it was, and writes the binary model to
/// `outPath` atomically. Errors: "<model>: initializer 'x': ..." for a name the model lacks or
/// another dtype/shape, "<outPath>: ..." for write failures (no partial file).
/// With `untieInitializers` (a plan compiled with --untie-initializers) the model's merged
/// initializers are untied first, as import did (compiler/onnx/UntieInitializers.h), so the
/// written model has the copies, each with its own trained values, in the form that trained.
Status exportTrainedModel(const std::string &modelPath, const std::vector<HostArray> &initializers,
                          const std::string &outPath, bool untieInitializers = false);

} // namespace dtc::rt
