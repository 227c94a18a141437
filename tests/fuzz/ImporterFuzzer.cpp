// libFuzzer target for the ONNX importer: the input bytes are written to a model file and
// imported through importModelFile (format sniffing, binary/text parsing, bad-file diagnosis,
// graph construction, opset normalization), then shape inference runs. It must never crash.
#include "compiler/onnx/Importer.h"
#include "passes/Passes.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

/// A private folder for the model file (external data locations resolve against it).
const std::string &modelPath() {
  static const std::string path = [] {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "dtc-fuzz-importer-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      std::abort();
    return tmpl + "/model.onnx";
  }();
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = modelPath();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(size));
  }
  dtc::Diagnostics diags;
  auto graph = dtc::onnxio::importModelFile(path, diags);
  if (!graph) {
    // Errors must say where: "<file or node>: <what>".
    if (graph.status().message().empty())
      std::abort();
    return 0;
  }
  dtc::passes::PassContext ctx;
  std::unique_ptr<dtc::passes::Pass> pass = dtc::passes::createPassByName("shape-inference");
  if (!pass)
    std::abort();
  dtc::Status s = pass->run(**graph, ctx);
  (void)s;
  return 0;
}
