// Unit tests of ONNX export: model fields, constants vs parameters, opset bump for canonical
// forms, atomic writes, automatic external data, and re-import to the same IR.
#include "compiler/ir/Printer.h"
#include "compiler/onnx/Exporter.h"
#include "compiler/onnx/Importer.h"
#include "tests/unit/ops/TestUtil.h"

#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <filesystem>

using namespace dtc;
namespace fs = std::filesystem;

namespace {

const char *kModel = R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 4] x) => (float[N, 3] y) {
  w = Constant <value = float[4, 3] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}> ()
  h = MatMul(x, w)
  y = Relu(h)
}
)";

std::string tempPath(const std::string &name) {
  return (fs::temp_directory_path() / ("dtc_export_" + name)).string();
}

} // namespace

TEST(Exporter, ModelFieldsAndCheckerPass) {
  auto g = test::compileText(kModel);
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  auto model = onnxio::exportModel(**g);
  ASSERT_TRUE(model.hasValue()) << model.status().message();
  EXPECT_EQ(model->producer_name(), "dtc");
  ASSERT_EQ(model->graph().input_size(), 1);
  EXPECT_EQ(model->graph().input(0).name(), "x");
  const auto &dims = model->graph().input(0).type().tensor_type().shape().dim();
  ASSERT_EQ(dims.size(), 2);
  EXPECT_EQ(dims[0].dim_param(), "N");
  EXPECT_EQ(dims[1].dim_value(), 4);
  // The Constant stays a Constant node (not a trainable initializer).
  EXPECT_EQ(model->graph().initializer_size(), 0);
  EXPECT_EQ(model->graph().node(0).op_type(), "Constant");
  EXPECT_NO_THROW(onnx::checker::check_model(*model));
}

TEST(Exporter, RoundTripGivesSameIR) {
  auto g = test::compileText(kModel);
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  auto model = onnxio::exportModel(**g);
  ASSERT_TRUE(model.hasValue());
  Diagnostics diags;
  auto again = onnxio::importModelProto(*model, ".", "<export>", diags);
  ASSERT_TRUE(again.hasValue()) << again.status().message();
  EXPECT_EQ(ir::printGraph(**again), ir::printGraph(**g));
}

TEST(Exporter, CanonicalFormsRaiseTheOpset) {
  // ReduceMean's canonical form (axes as an input) exists from opset 18 on.
  auto g = test::compileText(R"(
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[N, 4] x) => (float[N, 1] y) {
  y = ReduceMean <axes = [1]> (x)
}
)");
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  auto model = onnxio::exportModel(**g);
  ASSERT_TRUE(model.hasValue());
  int64_t opset = 0;
  for (const auto &o : model->opset_import())
    if (o.domain().empty())
      opset = o.version();
  EXPECT_GE(opset, 18);
  EXPECT_GE(model->ir_version(), 8);
}

TEST(Exporter, LargeModelsGoToExternalDataAndReimport) {
  auto g = test::compileText(kModel);
  ASSERT_TRUE(g.hasValue()) << g.status().message();
  std::string path = tempPath("ext.onnx");
  onnxio::ExportOptions opts;
  opts.externalThresholdBytes = 16; // force external data
  opts.externalMinBytes = 16;
  // Parameters go external; make the Constant weight a parameter for this test.
  ir::Graph &graph = **g;
  ir::Value *w = nullptr;
  for (ir::Value *v : graph.initializers())
    w = v;
  ASSERT_NE(w, nullptr);
  graph.setInitializer(w, w->initializer(), /*isConstant=*/false);
  ASSERT_TRUE(onnxio::writeModelFile(graph, path, opts).isOk());
  ASSERT_TRUE(fs::exists(path + ".data"));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  Diagnostics diags;
  auto again = onnxio::importModelFile(path, diags);
  ASSERT_TRUE(again.hasValue()) << again.status().message();
  ir::Value *w2 = (*again)->findValue(w->name());
  ASSERT_NE(w2, nullptr);
  ASSERT_TRUE(w2->isInitializer());
  EXPECT_TRUE(w2->initializer()->isExternal());
  EXPECT_EQ(*w2->initializer()->toDoubles(), *w->initializer()->toDoubles());
  fs::remove(path);
  fs::remove(path + ".data");
}

TEST(Exporter, FailedWriteLeavesNoFile) {
  auto g = test::compileText(kModel);
  ASSERT_TRUE(g.hasValue());
  std::string path = "/nonexistent-dir/dtc/out.onnx";
  Status s = onnxio::writeModelFile(**g, path);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find(path), std::string::npos);
  EXPECT_FALSE(fs::exists(path));
}
