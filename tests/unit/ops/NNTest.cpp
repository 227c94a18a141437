// Unit tests of the nn operator definitions (ops/nn/): form checks per opset, normalization of
// older forms into the canonical form, and shape/type inference with symbolic batch dims.
// Graphs are built with the Graph API and run through checkForm -> normalize -> inference.
#include "compiler/ir/Printer.h"
#include "compiler/ir/Verifier.h"
#include "ops/OpDef.h"

#include <gtest/gtest.h>

#include <sstream>

namespace dtc {
namespace {

using ir::DType;

/// "N,3,?,32" -> Shape (numbers static, '?' unknown, other names symbols); "*" = unknown rank.
ir::Shape shape(const std::string &text) {
  if (text == "*")
    return ir::Shape::unknownRank();
  std::vector<ir::Dim> dims;
  std::stringstream ss(text);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok == "?")
      dims.push_back(ir::Dim::unknown());
    else if (!tok.empty() && (std::isdigit(static_cast<unsigned char>(tok[0])) != 0))
      dims.push_back(ir::Dim::fixed(std::stoll(tok)));
    else
      dims.push_back(ir::Dim::symbol(tok));
  }
  return ir::Shape(std::move(dims));
}

/// A graph under construction at one opset, with helpers that mimic the importer.
struct G {
  explicit G(int64_t opset) : opset(opset) { g.setOpset("", opset); }
  ir::Graph g;
  int64_t opset;
  ops::ShapeValueMap shapeValues;
  Diagnostics diags;

  ir::Value *in(const std::string &name, const std::string &dims, DType t = DType::kFloat32) {
    ir::Value *v = g.createValue(name, {t, shape(dims)});
    g.addInput(v);
    return v;
  }
  ir::Value *ints(const std::string &name, const std::vector<int64_t> &values) {
    return g.addConstant(
        name, ir::TensorData::fromInt64s(name, {static_cast<int64_t>(values.size())}, values));
  }
  ir::Value *floats(const std::string &name, const std::vector<float> &values) {
    return g.addConstant(
        name, ir::TensorData::fromFloats(name, {static_cast<int64_t>(values.size())}, values));
  }
  ir::Node *node(const std::string &op, const std::vector<ir::Value *> &inputs,
                 const std::vector<std::string> &outputs,
                 const std::map<std::string, ir::Attribute> &attrs = {},
                 const std::string &name = "n") {
    ir::Node *n = g.addNode(op, inputs, outputs, "", name);
    for (const auto &[k, v] : attrs)
      n->setAttr(k, v);
    return n;
  }
  /// checkForm against the declared opset, then normalize (what the importer does).
  Status import() {
    for (ir::Node *n : g.nodes()) {
      const ops::OpDef *def = ops::lookupOp(n->domain(), n->opType());
      if (!def)
        return Status::error(n->where(), "unknown op");
      const ops::OpVersion *v = def->versionFor(opset);
      if (!v)
        return Status::error(n->where(), "op does not exist in this opset");
      DTC_RETURN_IF_ERROR(ops::checkForm(*n, *v, opset));
      if (def->normalize) {
        ops::NormalizeContext ctx(g, opset, diags);
        DTC_RETURN_IF_ERROR(def->normalize(*n, ctx));
      }
    }
    return ir::verifyGraph(g);
  }
  /// Type checks and shape inference of every node (what shape-inference does).
  Status infer() {
    for (ir::Node *n : g.nodes()) {
      const ops::OpDef *def = ops::lookupOp(n->domain(), n->opType());
      DTC_RETURN_IF_ERROR(ops::checkForm(*n, def->canonical(), def->canonical().since));
      DTC_RETURN_IF_ERROR(ops::checkTypesAndSetOutputDTypes(*n, def->canonical()));
      ops::InferenceContext ctx(*n, shapeValues, diags);
      DTC_RETURN_IF_ERROR(def->infer(ctx));
    }
    return Status::ok();
  }
  Status run() {
    DTC_RETURN_IF_ERROR(import());
    return infer();
  }
  std::string type(const std::string &value) const {
    const ir::Value *v = g.findValue(value);
    return v ? v->type().str() : "<missing>";
  }
  std::string print(const std::string &nodeName = "n") const {
    const ir::Node *n = g.findNode(nodeName);
    return n ? ir::printNode(*n) : "<missing>";
  }
};

// Expects `s` to be an error containing `part`.
#define EXPECT_ERROR(s, part)                                                                      \
  do {                                                                                             \
    Status st_ = (s);                                                                              \
    ASSERT_FALSE(st_.isOk()) << "expected an error containing: " << (part);                        \
    EXPECT_NE(st_.message().find(part), std::string::npos) << st_.message();                       \
  } while (0)

#define ASSERT_OK(s)                                                                               \
  do {                                                                                             \
    Status st_ = (s);                                                                              \
    ASSERT_TRUE(st_.isOk()) << st_.message();                                                      \
  } while (0)

// --- MatMul ----------------------------------------------------------------------------------

TEST(NNMatMul, TwoDWithSymbolicBatch) {
  G t(13);
  t.node("MatMul", {t.in("a", "N,784"), t.in("b", "784,128")}, {"y"});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,128]");
}

TEST(NNMatMul, VectorOperands) {
  G t(13);
  t.node("MatMul", {t.in("v", "4"), t.in("m", "N,4,5")}, {"y1"}, {}, "a");
  t.node("MatMul", {t.in("m2", "N,3,4"), t.in("v2", "4")}, {"y2"}, {}, "b");
  t.node("MatMul", {t.in("v3", "4"), t.in("v4", "4")}, {"y3"}, {}, "c");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y1"), "f32[N,5]");
  EXPECT_EQ(t.type("y2"), "f32[N,3]");
  EXPECT_EQ(t.type("y3"), "f32[]");
}

TEST(NNMatMul, BatchBroadcast) {
  G t(13);
  t.node("MatMul", {t.in("a", "N,1,4,5"), t.in("b", "3,5,6")}, {"y"});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,3,4,6]");
}

TEST(NNMatMul, Errors) {
  G t(13);
  t.node("MatMul", {t.in("a", "N,4,5"), t.in("b", "6,7")}, {"y"}, {}, "mm");
  EXPECT_ERROR(t.run(), "node 'mm' (MatMul): inner dimensions do not match: A [N,4,5] has K=5");
  G u(13);
  u.node("MatMul", {u.in("a", ""), u.in("b", "6,7")}, {"y"}, {}, "mm");
  EXPECT_ERROR(u.run(), "node 'mm' (MatMul): MatMul operands must have rank >= 1");
  G w(13);
  w.node("MatMul", {w.in("a", "2,3", DType::kBool), w.in("b", "3,2", DType::kBool)}, {"y"});
  EXPECT_ERROR(w.run(), "has type bool; allowed:");
}

// --- Gemm ------------------------------------------------------------------------------------

TEST(NNGemm, TransposesAndBias) {
  G t(13);
  t.node("Gemm", {t.in("a", "784,N"), t.in("w", "128,784"), t.in("c", "128")}, {"y"},
         {{"transA", int64_t{1}}, {"transB", int64_t{1}}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,128]");
}

TEST(NNGemm, COptionalFrom11RequiredBefore) {
  G t(11);
  t.node("Gemm", {t.in("a", "N,4"), t.in("b", "4,5")}, {"y"});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,5]");
  G u(9);
  u.node("Gemm", {u.in("a", "N,4"), u.in("b", "4,5")}, {"y"}, {}, "fc");
  EXPECT_ERROR(u.run(), "node 'fc' (Gemm): expects at least 3 inputs in opset 9, got 2");
}

TEST(NNGemm, Errors) {
  G t(13);
  t.node("Gemm", {t.in("a", "N,4"), t.in("b", "5,6")}, {"y"}, {}, "fc");
  EXPECT_ERROR(t.run(), "node 'fc' (Gemm): inner dimensions do not match");
  G u(13);
  u.node("Gemm", {u.in("a", "2,4"), u.in("b", "4,6"), u.in("c", "3,6")}, {"y"}, {}, "fc");
  EXPECT_ERROR(u.run(), "node 'fc' (Gemm): C [3,6] cannot be broadcast to (M, N) = (2, 6)");
  G s(13); // a symbolic M may equal C's 3 at run time: accepted
  s.node("Gemm", {s.in("a", "N,4"), s.in("b", "4,6"), s.in("c", "3,6")}, {"y"}, {}, "fc");
  ASSERT_OK(s.run());
  EXPECT_EQ(s.type("y"), "f32[N,6]");
  G w(13);
  w.node("Gemm", {w.in("a", "N,4"), w.in("b", "4,6"), w.in("c", "5")}, {"y"}, {}, "fc");
  EXPECT_ERROR(w.run(), "C [5] cannot be broadcast");
  G x(13);
  x.node("Gemm", {x.in("a", "2,N,4"), x.in("b", "4,6")}, {"y"}, {}, "fc");
  EXPECT_ERROR(x.run(), "A and B must be 2-D");
}

// --- Conv ------------------------------------------------------------------------------------

TEST(NNConv, SamePaddingKeepsSymbolicBatch) {
  G t(13);
  t.node("Conv", {t.in("x", "N,3,32,32"), t.in("w", "16,3,3,3"), t.in("b", "16")}, {"y"},
         {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,16,32,32]");
}

TEST(NNConv, StridesDilationsAnd1D3D) {
  G t(11);
  t.node("Conv", {t.in("x", "N,3,32,32"), t.in("w", "8,3,3,3")}, {"y"},
         {{"strides", std::vector<int64_t>{2, 2}}}, "a");
  t.node("Conv", {t.in("x1", "N,4,10"), t.in("w1", "6,4,3")}, {"y1"},
         {{"dilations", std::vector<int64_t>{2}}}, "b");
  t.node(
      "Conv", {t.in("x3", "2,4,8,8,8"), t.in("w3", "5,4,2,2,2")}, {"y3"},
      {{"strides", std::vector<int64_t>{2, 2, 2}}, {"kernel_shape", std::vector<int64_t>{2, 2, 2}}},
      "c");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,8,15,15]");
  EXPECT_EQ(t.type("y1"), "f32[N,6,6]"); // 10 - 2*(3-1) = 6
  EXPECT_EQ(t.type("y3"), "f32[2,5,4,4,4]");
}

TEST(NNConv, AutoPadAndGroups) {
  G t(13);
  t.node(
      "Conv", {t.in("x", "N,8,31,31"), t.in("w", "8,2,3,3")}, {"y"},
      {{"auto_pad", "SAME_UPPER"}, {"strides", std::vector<int64_t>{2, 2}}, {"group", int64_t{4}}},
      "a");
  t.node("Conv", {t.in("x2", "N,3,7,7"), t.in("w2", "4,3,3,3")}, {"y2"},
         {{"auto_pad", "VALID"}, {"strides", std::vector<int64_t>{2, 2}}}, "b");
  t.node("Conv", {t.in("x3", "N,3,H,W"), t.in("w3", "4,3,3,3")}, {"y3"},
         {{"auto_pad", "SAME_LOWER"}}, "c");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,8,16,16]");
  EXPECT_EQ(t.type("y2"), "f32[N,4,3,3]");
  EXPECT_EQ(t.type("y3"), "f32[N,4,H,W]"); // stride 1, SAME: spatial size kept exactly
}

TEST(NNConv, SymbolicSpatialWithStrideIsUnknown) {
  G t(13);
  t.node("Conv", {t.in("x", "N,3,H,W"), t.in("w", "16,3,3,3")}, {"y"},
         {{"strides", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,16,?,?]");
}

TEST(NNConv, Errors) {
  G t(13);
  t.node("Conv", {t.in("x", "N,3,32,32"), t.in("w", "16,4,3,3")}, {"y"}, {}, "conv1");
  EXPECT_ERROR(t.run(), "node 'conv1' (Conv): input channels 3 of X [N,3,32,32] do not equal "
                        "group (1) * W.shape[1] (4)");
  G u(13);
  u.node("Conv", {u.in("x", "N,3,32,32"), u.in("w", "16,3,3,3")}, {"y"},
         {{"pads", std::vector<int64_t>{1, -1, 1, 1}}}, "conv1");
  EXPECT_ERROR(u.run(), "node 'conv1' (Conv): pads [1,-1,1,1] must be non-negative");
  G w(13);
  w.node("Conv", {w.in("x", "N,3,32,32"), w.in("w", "16,3,3,3")}, {"y"},
         {{"strides", std::vector<int64_t>{2}}}, "conv1");
  EXPECT_ERROR(w.run(), "strides [2] has 1 values; expected 2");
  G x(13);
  x.node("Conv", {x.in("x", "N,3,2,2"), x.in("w", "16,3,3,3")}, {"y"}, {}, "conv1");
  EXPECT_ERROR(x.run(), "node 'conv1' (Conv): window of size 3 is larger than the padded input 2");
  G b(13);
  b.node("Conv", {b.in("x", "N,3,8,8"), b.in("w", "16,3,3,3"), b.in("b", "8")}, {"y"}, {}, "conv1");
  EXPECT_ERROR(b.run(), "bias B [8] must be [M] with M = 16");
  G k(13);
  k.node("Conv", {k.in("x", "N,3,8,8"), k.in("w", "16,3,3,3")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{5, 5}}}, "conv1");
  EXPECT_ERROR(k.run(), "kernel_shape does not match W [16,3,3,3]");
  G a(13);
  a.node("Conv", {a.in("x", "N,3,8,8"), a.in("w", "16,3,3,3")}, {"y"}, {{"auto_pad", "SAME"}},
         "conv1");
  EXPECT_ERROR(a.run(), "attribute auto_pad=\"SAME\" is not one of");
  G r(13);
  r.node("Conv", {r.in("x", "N,3,8,8"), r.in("w", "16,3,3")}, {"y"}, {}, "conv1");
  EXPECT_ERROR(r.run(), "W [16,3,3] must have the rank of X");
}

// --- ConvTranspose ---------------------------------------------------------------------------

TEST(NNConvTranspose, StrideTwoDoublesSymbolicSize) {
  G t(13);
  t.node("ConvTranspose", {t.in("x", "N,8,H,16"), t.in("w", "8,4,2,2")}, {"y"},
         {{"strides", std::vector<int64_t>{2, 2}}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,4,2*H,32]");
}

TEST(NNConvTranspose, PaddingOutputPaddingGroups) {
  G t(13);
  // 2*(7-1) + 1 + 3 - 1 - 1 = 14
  t.node("ConvTranspose", {t.in("x", "N,8,7,7"), t.in("w", "8,2,3,3"), t.in("b", "4")}, {"y"},
         {{"strides", std::vector<int64_t>{2, 2}},
          {"pads", std::vector<int64_t>{1, 1, 1, 1}},
          {"output_padding", std::vector<int64_t>{1, 1}},
          {"group", int64_t{2}}},
         "a");
  t.node("ConvTranspose", {t.in("x2", "N,8,7,7"), t.in("w2", "8,3,3,3")}, {"y2"},
         {{"strides", std::vector<int64_t>{2, 2}}, {"output_shape", std::vector<int64_t>{15, 14}}},
         "b");
  t.node("ConvTranspose", {t.in("x3", "N,8,7"), t.in("w3", "8,3,3")}, {"y3"},
         {{"strides", std::vector<int64_t>{3}}, {"auto_pad", "SAME_UPPER"}}, "c");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,4,14,14]");
  EXPECT_EQ(t.type("y2"), "f32[N,3,15,14]");
  EXPECT_EQ(t.type("y3"), "f32[N,3,21]");
}

TEST(NNConvTranspose, Errors) {
  G t(13);
  t.node("ConvTranspose", {t.in("x", "N,8,7,7"), t.in("w", "4,2,3,3")}, {"y"}, {}, "up");
  EXPECT_ERROR(t.run(), "node 'up' (ConvTranspose): input channels 8 of X [N,8,7,7] do not "
                        "equal W.shape[0] (4)");
  G u(13);
  u.node("ConvTranspose", {u.in("x", "N,8,7,7"), u.in("w", "8,2,3,3")}, {"y"},
         {{"pads", std::vector<int64_t>{-1, 0, 0, 0}}}, "up");
  EXPECT_ERROR(u.run(), "node 'up' (ConvTranspose): pads [-1,0,0,0] must be non-negative");
  G w(13);
  w.node("ConvTranspose", {w.in("x", "N,8,7,7"), w.in("w", "8,2,3,3")}, {"y"},
         {{"output_shape", std::vector<int64_t>{14}}}, "up");
  EXPECT_ERROR(w.run(), "output_shape has 1 values; expected 2");
  G o(13);
  o.node("ConvTranspose", {o.in("x", "N,8,7,7"), o.in("w", "8,2,3,3")}, {"y"},
         {{"output_padding", std::vector<int64_t>{1, 1}}}, "up");
  EXPECT_ERROR(o.run(), "output_padding[0] = 1 must be non-negative and smaller than the stride");
}

// --- MaxPool / AveragePool / GlobalAveragePool -----------------------------------------------

TEST(NNMaxPool, BasicWithIndices) {
  G t(12);
  t.node("MaxPool", {t.in("x", "N,3,32,32", DType::kUInt8)}, {"y", "idx"},
         {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "u8[N,3,16,16]");
  EXPECT_EQ(t.type("idx"), "i64[N,3,16,16]");
}

TEST(NNMaxPool, CeilModeDropsWindowStartingInPadding) {
  // in 5, kernel 2, stride 2, pads 1/1: naive ceil((5+2-2)/2)+1 = 4, but the 4th window would
  // start at padded index 6, past the input (padded end of data is 1+5 = 6): dropped -> 3.
  G t(10);
  t.node("MaxPool", {t.in("x", "N,1,5,6")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{2, 2}},
          {"strides", std::vector<int64_t>{2, 2}},
          {"pads", std::vector<int64_t>{1, 0, 1, 0}},
          {"ceil_mode", int64_t{1}}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,1,3,3]");
  // Without padding the last partial window starts inside the input and is kept:
  // 6 -> (6-2)/2+1 = 3; 7 -> ceil((7-2)/2)+1 = 4 (floor mode would give 3).
  G f(10);
  f.node("MaxPool", {f.in("x", "N,1,6,7")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{2, 2}},
          {"strides", std::vector<int64_t>{2, 2}},
          {"ceil_mode", int64_t{1}}});
  ASSERT_OK(f.run());
  EXPECT_EQ(f.type("y"), "f32[N,1,3,4]");
}

TEST(NNMaxPool, DilationsAndSamePadding) {
  G t(11);
  t.node("MaxPool", {t.in("x", "N,3,10,10")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"dilations", std::vector<int64_t>{2, 2}}},
         "a");
  t.node("MaxPool", {t.in("x2", "N,3,H,9")}, {"y2"},
         {{"kernel_shape", std::vector<int64_t>{3, 3}},
          {"auto_pad", "SAME_LOWER"},
          {"strides", std::vector<int64_t>{1, 2}}},
         "b");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,3,6,6]");
  EXPECT_EQ(t.type("y2"), "f32[N,3,H,5]");
}

TEST(NNMaxPool, FormsPerOpset) {
  G t(8);
  t.node("MaxPool", {t.in("x", "N,3,8,8")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"ceil_mode", int64_t{1}}}, "pool");
  EXPECT_ERROR(
      t.run(),
      "node 'pool' (MaxPool): attribute 'ceil_mode' is not allowed for MaxPool in opset 8");
  G u(7);
  u.node("MaxPool", {u.in("x", "N,3,8,8")}, {"y", "i"},
         {{"kernel_shape", std::vector<int64_t>{2, 2}}}, "pool");
  EXPECT_ERROR(u.run(), "node 'pool' (MaxPool): has 2 outputs; expects 1 to 1 in opset 7");
  G v(8);
  v.node("MaxPool", {v.in("x", "N,3,8,8")}, {"y", "i"},
         {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"storage_order", int64_t{1}}}, "pool");
  ASSERT_OK(v.run());
  EXPECT_EQ(v.type("i"), "i64[N,3,7,7]");
  G w(12);
  w.node("MaxPool", {w.in("x", "N,3,8,8", DType::kInt32)}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{2, 2}}}, "pool");
  EXPECT_ERROR(w.run(), "node 'pool' (MaxPool): input 0 ('X', value 'x') has type i32; allowed:");
}

TEST(NNMaxPool, Errors) {
  G t(13);
  t.node("MaxPool", {t.in("x", "N,3,8,8")}, {"y"}, {}, "pool");
  EXPECT_ERROR(t.run(), "node 'pool' (MaxPool): required attribute 'kernel_shape' is missing");
  G u(13);
  u.node("MaxPool", {u.in("x", "N,3,8,8")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{2, 0, 0, 0}}},
         "pool");
  EXPECT_ERROR(u.run(), "node 'pool' (MaxPool): pads must be smaller than the kernel");
  G w(13);
  w.node("MaxPool", {w.in("x", "N,3,8,8")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{2, 2, 2}}}, "pool");
  EXPECT_ERROR(w.run(), "kernel_shape [2,2,2] has 3 values; expected 2");
  G s(13);
  s.node("MaxPool", {s.in("x", "N,3,8,8")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"storage_order", int64_t{2}}}, "pool");
  EXPECT_ERROR(s.run(), "storage_order must be 0");
}

TEST(NNAveragePool, FormsAndInference) {
  G t(10);
  t.node("AveragePool", {t.in("x", "N,3,7,7")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{3, 3}},
          {"strides", std::vector<int64_t>{2, 2}},
          {"count_include_pad", int64_t{1}},
          {"ceil_mode", int64_t{1}}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,3,3,3]");
  G u(11);
  u.node("AveragePool", {u.in("x", "N,3,7,7")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"dilations", std::vector<int64_t>{2, 2}}},
         "avg");
  EXPECT_ERROR(u.run(), "node 'avg' (AveragePool): attribute 'dilations' is not allowed for "
                        "AveragePool in opset 11");
  G v(19);
  v.node("AveragePool", {v.in("x", "N,3,7,7")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"dilations", std::vector<int64_t>{2, 2}}});
  ASSERT_OK(v.run());
  EXPECT_EQ(v.type("y"), "f32[N,3,3,3]");
  G w(9);
  w.node("AveragePool", {w.in("x", "N,3,7,7")}, {"y"},
         {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"ceil_mode", int64_t{1}}}, "avg");
  EXPECT_ERROR(w.run(), "attribute 'ceil_mode' is not allowed for AveragePool in opset 9");
}

TEST(NNGlobalAveragePool, Inference) {
  G t(13);
  t.node("GlobalAveragePool", {t.in("x", "N,C,H,W")}, {"y"}, {}, "a");
  t.node("GlobalAveragePool", {t.in("x3", "N,8,4,4,4", DType::kFloat16)}, {"y3"}, {}, "b");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,C,1,1]");
  EXPECT_EQ(t.type("y3"), "f16[N,8,1,1,1]");
  G u(13);
  u.node("GlobalAveragePool", {u.in("x", "N,8")}, {"y"}, {}, "gap");
  EXPECT_ERROR(u.run(), "node 'gap' (GlobalAveragePool): X must have rank >= 3");
}

// --- BatchNormalization ----------------------------------------------------------------------

TEST(NNBatchNorm, CanonicalInferenceAndTraining) {
  G t(15);
  t.node("BatchNormalization",
         {t.in("x", "N,16,8,8", DType::kFloat16), t.in("s", "16"), t.in("b", "16"), t.in("m", "16"),
          t.in("v", "16")},
         {"y", "rm", "rv"}, {{"training_mode", int64_t{1}}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f16[N,16,8,8]");
  EXPECT_EQ(t.type("rm"), "f32[16]");
  EXPECT_EQ(t.type("rv"), "f32[16]");
}

TEST(NNBatchNorm, Opset7SpatialNormalization) {
  G t(7);
  t.node("BatchNormalization",
         {t.in("x", "N,4,8,8"), t.in("s", "4"), t.in("b", "4"), t.in("m", "4"), t.in("v", "4")},
         {"y"}, {{"spatial", int64_t{1}}, {"epsilon", 0.25f}}, "bn");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.print("bn"),
            "%y : f32[N,4,8,8] = BatchNormalization \"bn\" (%x, %s, %b, %m, %v) {epsilon=0.25}");
  G u(7);
  u.node("BatchNormalization",
         {u.in("x", "N,4,8,8"), u.in("s", "4"), u.in("b", "4"), u.in("m", "4"), u.in("v", "4")},
         {"y"}, {{"spatial", int64_t{0}}}, "bn");
  EXPECT_ERROR(u.run(), "node 'bn' (BatchNormalization): spatial=0 (per-activation statistics, "
                        "opset 7 form) is not supported");
  G w(9);
  w.node("BatchNormalization",
         {w.in("x", "N,4,8,8"), w.in("s", "4"), w.in("b", "4"), w.in("m", "4"), w.in("v", "4")},
         {"y"}, {{"spatial", int64_t{1}}}, "bn");
  EXPECT_ERROR(w.run(), "attribute 'spatial' is not allowed for BatchNormalization in opset 9");
}

TEST(NNBatchNorm, Opset9TrainingFormBecomesTrainingMode) {
  G t(9);
  t.node("BatchNormalization",
         {t.in("x", "N,4,8,8"), t.in("s", "4"), t.in("b", "4"), t.in("m", "4"), t.in("v", "4")},
         {"y", "mean", "var", "sm", "sv"}, {}, "bn");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.print("bn"), "%y : f32[N,4,8,8], %mean : f32[4], %var : f32[4] = "
                           "BatchNormalization \"bn\" (%x, %s, %b, %m, %v) {training_mode=1}");
  EXPECT_EQ(t.type("sm"), "<missing>");
  G u(9);
  ir::Node *n =
      u.node("BatchNormalization",
             {u.in("x", "N,4,8,8"), u.in("s", "4"), u.in("b", "4"), u.in("m", "4"), u.in("v", "4")},
             {"y", "mean", "var", "sm"}, {}, "bn");
  u.g.addOutput(n->output(3));
  EXPECT_ERROR(u.run(), "node 'bn' (BatchNormalization): output 3 ('sm', saved_mean/saved_var of "
                        "the opset 9 training form) is used");
  G w(14);
  w.node("BatchNormalization",
         {w.in("x", "N,4,8,8"), w.in("s", "4"), w.in("b", "4"), w.in("m", "4"), w.in("v", "4")},
         {"y", "mean", "var", "sm"}, {}, "bn");
  EXPECT_ERROR(w.run(), "has 4 outputs; expects 1 to 3 in opset 14");
}

TEST(NNBatchNorm, Errors) {
  G t(15);
  t.node("BatchNormalization",
         {t.in("x", "N,4,8,8"), t.in("s", "4"), t.in("b", "4"), t.in("m", "5"), t.in("v", "4")},
         {"y"}, {}, "bn");
  EXPECT_ERROR(t.run(), "node 'bn' (BatchNormalization): input_mean [5] must be [C] with C = 4");
  G u(14); // opset 14: scale and mean types must match X (T/U); canonical 15 allows mixing
  u.node("BatchNormalization",
         {u.in("x", "N,4", DType::kFloat16), u.in("s", "4"), u.in("b", "4"), u.in("m", "4"),
          u.in("v", "4")},
         {"y"}, {}, "bn");
  ASSERT_OK(u.run());
  EXPECT_EQ(u.type("y"), "f16[N,4]");
}

// --- LayerNormalization ----------------------------------------------------------------------

TEST(NNLayerNorm, OutputsAndStatShapes) {
  G t(17);
  t.node("LayerNormalization",
         {t.in("x", "N,S,512", DType::kFloat16), t.in("g", "512", DType::kFloat16)},
         {"y", "mean", "inv"}, {{"axis", int64_t{-1}}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f16[N,S,512]");
  EXPECT_EQ(t.type("mean"), "f32[N,S,1]");
  EXPECT_EQ(t.type("inv"), "f32[N,S,1]");
  G u(17);
  u.node("LayerNormalization", {u.in("x", "N,S,4,8"), u.in("g", "4,8"), u.in("b", "8")},
         {"y", "mean"}, {{"axis", int64_t{2}}});
  ASSERT_OK(u.run());
  EXPECT_EQ(u.type("mean"), "f32[N,S,1,1]");
}

TEST(NNLayerNorm, Errors) {
  G t(16);
  t.node("LayerNormalization", {t.in("x", "N,8"), t.in("g", "8")}, {"y"}, {}, "ln");
  EXPECT_ERROR(t.import(), "node 'ln' (LayerNormalization): op does not exist in this opset");
  G u(17);
  u.node("LayerNormalization", {u.in("x", "N,8"), u.in("g", "8")}, {"y"}, {{"axis", int64_t{2}}},
         "ln");
  EXPECT_ERROR(u.run(), "node 'ln' (LayerNormalization): axis 2 is out of range for rank 2");
  G w(17);
  w.node("LayerNormalization", {w.in("x", "N,8"), w.in("g", "8")}, {"y"},
         {{"stash_type", int64_t{11}}}, "ln");
  EXPECT_ERROR(w.run(), "stash_type 11 is not supported");
  G s(17);
  s.node("LayerNormalization", {s.in("x", "N,8"), s.in("g", "7")}, {"y"}, {}, "ln");
  EXPECT_ERROR(s.run(), "node 'ln' (LayerNormalization): shapes cannot be broadcast");
}

// --- Resize ----------------------------------------------------------------------------------

TEST(NNResize, Opset10Normalization) {
  G t(10);
  t.node("Resize", {t.in("x", "N,3,16,16"), t.floats("sc", {1, 1, 2, 2})}, {"y"}, {}, "rs");
  t.node("Resize", {t.in("x2", "N,3,16,16"), t.floats("sc2", {1, 1, 0.5f, 0.5f})}, {"y2"},
         {{"mode", "linear"}}, "rl");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.print("rs"), "%y : f32[N,3,32,32] = Resize \"rs\" (%x, _, %sc) "
                           "{coordinate_transformation_mode=\"asymmetric\", "
                           "nearest_mode=\"floor\"}");
  EXPECT_EQ(t.print("rl"), "%y2 : f32[N,3,8,8] = Resize \"rl\" (%x2, _, %sc2) "
                           "{coordinate_transformation_mode=\"asymmetric\", mode=\"linear\"}");
}

TEST(NNResize, ScalesUseFloorRule) {
  G t(13);
  t.node("Resize", {t.in("x", "N,3,5,7"), nullptr, t.floats("sc", {1, 1, 1.5f, 0.3f})}, {"y"},
         {{"mode", "linear"}});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,3,7,2]"); // floor(7.5), floor(2.1)
}

TEST(NNResize, SymbolicDimsWithIntegerScales) {
  G t(13);
  t.node("Resize", {t.in("x", "N,3,H,W"), nullptr, t.floats("sc", {1, 1, 2, 1.5f})}, {"y"});
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,3,2*H,?]");
}

TEST(NNResize, ConstantAndPropagatedSizes) {
  G t(13);
  t.node("Resize", {t.in("x", "N,3,16,16"), nullptr, nullptr, t.ints("sz", {1, 3, 20, 24})}, {"y"},
         {}, "a");
  // torchvision style: sizes computed from Shape/Slice/Concat, known by data propagation.
  ir::Value *sizes = t.in("dyn", "4", DType::kInt64);
  t.shapeValues[sizes] = {ir::Dim::symbol("N"), ir::Dim::fixed(21), ir::Dim::fixed(64),
                          ir::Dim::fixed(64)};
  t.node("Resize", {t.in("f", "N,21,16,16"), nullptr, nullptr, sizes}, {"y2"}, {{"mode", "linear"}},
         "b");
  t.node("Resize", {t.in("f3", "N,21,16,16"), nullptr, nullptr, t.in("unk", "4", DType::kInt64)},
         {"y3"}, {}, "c");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[1,3,20,24]");
  EXPECT_EQ(t.type("y2"), "f32[N,21,64,64]");
  EXPECT_EQ(t.type("y3"), "f32[?,?,?,?]");
}

TEST(NNResize, EmptyRoiAndScalesAreAbsent) {
  G t(11);
  t.node(
      "Resize",
      {t.in("x", "N,3,16,16"), t.floats("roi", {}), t.floats("sc", {}), t.ints("sz", {2, 3, 8, 8})},
      {"y"}, {{"mode", "cubic"}}, "rs");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.print("rs"), "%y : f32[2,3,8,8] = Resize \"rs\" (%x, _, _, %sz) {mode=\"cubic\"}");
  G u(13); // trailing empty sizes dropped as omitted; scales kept
  u.node("Resize", {u.in("x", "N,3,4,4"), u.floats("roi", {}), u.floats("sc", {1, 1, 2, 2})}, {"y"},
         {}, "rs");
  ASSERT_OK(u.run());
  EXPECT_EQ(u.print("rs"), "%y : f32[N,3,8,8] = Resize \"rs\" (%x, _, %sc)");
}

TEST(NNResize, AxesAndAspectRatioPolicy) {
  G t(18);
  t.node("Resize", {t.in("x", "N,3,20,10"), nullptr, nullptr, t.ints("sz", {8, 8})}, {"y"},
         {{"axes", std::vector<int64_t>{2, -1}}, {"keep_aspect_ratio_policy", "not_larger"}}, "a");
  t.node("Resize", {t.in("x2", "N,3,20,10"), nullptr, nullptr, t.ints("sz2", {8, 8})}, {"y2"},
         {{"axes", std::vector<int64_t>{2, 3}}, {"keep_aspect_ratio_policy", "not_smaller"}}, "b");
  t.node("Resize", {t.in("x3", "N,3,20,10"), nullptr, t.floats("sc3", {0.5f})}, {"y3"},
         {{"axes", std::vector<int64_t>{3}}}, "c");
  ASSERT_OK(t.run());
  EXPECT_EQ(t.type("y"), "f32[N,3,8,4]");   // scale min(8/20, 8/10) = 0.4
  EXPECT_EQ(t.type("y2"), "f32[N,3,16,8]"); // scale max(0.4, 0.8) = 0.8
  EXPECT_EQ(t.type("y3"), "f32[N,3,20,5]");
}

TEST(NNResize, FormsPerOpset) {
  G t(10);
  t.node("Resize",
         {t.in("x", "N,3,4,4"), t.floats("roi", {}), t.floats("sc", {1, 1, 2, 2}),
          t.ints("sz", {1, 3, 8, 8})},
         {"y"}, {}, "rs");
  EXPECT_ERROR(t.run(), "node 'rs' (Resize): expects at most 2 inputs in opset 10, got 4");
  G u(18);
  u.node("Resize", {u.in("x", "N,3,4,4"), nullptr, u.floats("sc", {1, 1, 2, 2})}, {"y"},
         {{"coordinate_transformation_mode", "half_pixel_symmetric"}}, "rs");
  EXPECT_ERROR(u.run(), "node 'rs' (Resize): attribute coordinate_transformation_mode="
                        "\"half_pixel_symmetric\" is not one of");
  G v(19);
  v.node("Resize", {v.in("x", "N,3,4,4"), nullptr, v.floats("sc", {1, 1, 2, 2})}, {"y"},
         {{"coordinate_transformation_mode", "half_pixel_symmetric"}}, "rs");
  ASSERT_OK(v.run());
  EXPECT_EQ(v.type("y"), "f32[N,3,8,8]");
  G w(13);
  w.node("Resize", {w.in("x", "N,3,4,4"), nullptr, w.floats("sc", {1, 1, 2, 2})}, {"y"},
         {{"axes", std::vector<int64_t>{2, 3}}}, "rs");
  EXPECT_ERROR(w.run(), "attribute 'axes' is not allowed for Resize in opset 13");
  G x(12);
  x.node("Resize", {x.in("x", "N,3,4,4"), nullptr, x.floats("sc", {1, 1, 2, 2})}, {"y"}, {}, "rs");
  EXPECT_ERROR(x.run(), "node 'rs' (Resize): required input 1 ('roi') is missing");
  G m(10);
  m.node("Resize", {m.in("x", "N,3,4,4"), m.floats("sc", {1, 1, 2, 2})}, {"y"}, {{"mode", "cubic"}},
         "rs");
  EXPECT_ERROR(m.run(), "attribute mode=\"cubic\" is not one of: nearest, linear");
}

TEST(NNResize, Errors) {
  G t(13);
  t.node("Resize",
         {t.in("x", "N,3,4,4"), nullptr, t.floats("sc", {1, 1, 2, 2}), t.ints("sz", {1, 3, 8, 8})},
         {"y"}, {}, "rs");
  EXPECT_ERROR(t.run(), "node 'rs' (Resize): only one of 'scales' and 'sizes' may be given");
  G u(13);
  u.node("Resize", {u.in("x", "N,3,4,4"), u.floats("roi", {})}, {"y"}, {}, "rs");
  EXPECT_ERROR(u.run(), "node 'rs' (Resize): one of 'scales' and 'sizes' must be given");
  G v(13);
  v.node("Resize", {v.in("x", "N,3,4,4"), nullptr, v.floats("sc", {2, 2})}, {"y"}, {}, "rs");
  EXPECT_ERROR(v.run(), "scales has 2 values; expected 4");
  G w(13);
  w.node("Resize", {w.in("x", "N,3,4,4"), nullptr, w.floats("sc", {1, 1, 0, 2})}, {"y"}, {}, "rs");
  EXPECT_ERROR(w.run(), "scales must be positive");
  G a(18);
  a.node("Resize", {a.in("x", "N,3,4,4"), nullptr, a.floats("sc", {2, 2})}, {"y"},
         {{"axes", std::vector<int64_t>{2, -2}}}, "rs");
  EXPECT_ERROR(a.run(), "axes contains axis 2 twice");
}

// --- Upsample --------------------------------------------------------------------------------

TEST(NNUpsample, Opset7BecomesResize) {
  G t(7);
  ir::Node *n = t.node("Upsample", {t.in("x", "N,3,8,8")}, {"y"},
                       {{"scales", std::vector<float>{1, 1, 2, 2}}}, "up");
  t.g.addOutput(n->output(0));
  ASSERT_OK(t.run());
  EXPECT_EQ(t.g.numNodes(), 1u);
  EXPECT_EQ(t.print("up"), "%y : f32[N,3,16,16] = Resize \"up\" (%x, _, %up.scales) "
                           "{coordinate_transformation_mode=\"asymmetric\", mode=\"nearest\", "
                           "nearest_mode=\"floor\"}");
  EXPECT_EQ(t.g.outputs()[0]->name(), "y");
  ASSERT_OK(ir::verifyGraph(t.g));
}

TEST(NNUpsample, Opset9And10ScalesInput) {
  for (int64_t opset : {9, 10}) {
    G t(opset);
    t.node("Upsample", {t.in("x", "N,3,8,8"), t.floats("sc", {1, 1, 2, 3})}, {"y"},
           {{"mode", "linear"}}, "up");
    t.node("Relu", {t.g.findValue("y")}, {"z"}, {}, "relu");
    ASSERT_OK(t.import());
    std::string printed = ir::printNode(*t.g.findNode("up"));
    EXPECT_NE(printed.find(" = Resize \"up\" (%x, _, %sc) {coordinate_transformation_mode="
                           "\"asymmetric\", mode=\"linear\"}"),
              std::string::npos)
        << printed;
    ASSERT_OK(t.infer());
    EXPECT_EQ(t.type("y"), "f32[N,3,16,24]");
    EXPECT_EQ(t.g.findNode("relu")->input(0)->producer(), t.g.findNode("up"));
  }
}

TEST(NNUpsample, Errors) {
  G t(9);
  t.node("Upsample", {t.in("x", "N,3,8,8")}, {"y"}, {{"scales", std::vector<float>{1, 1, 2, 2}}},
         "up");
  EXPECT_ERROR(t.run(), "node 'up' (Upsample): expects at least 2 inputs in opset 9, got 1");
  G a(9);
  a.node("Upsample", {a.in("x", "N,3,8,8"), a.floats("sc", {1, 1, 2, 2})}, {"y"},
         {{"scales", std::vector<float>{1, 1, 2, 2}}}, "up");
  EXPECT_ERROR(a.run(), "node 'up' (Upsample): attribute 'scales' is not allowed for Upsample in "
                        "opset 9");
  G u(7);
  u.node("Upsample", {u.in("x", "N,3,8,8")}, {"y"}, {{"scales", std::vector<float>{1, 1, 0.5f, 2}}},
         "up");
  EXPECT_ERROR(u.run(), "node 'up' (Upsample): scales must be >= 1");
  G w(7);
  w.node("Upsample", {w.in("x", "N,3,8,8")}, {"y"},
         {{"mode", "bicubic"}, {"scales", std::vector<float>{1, 1, 2, 2}}}, "up");
  EXPECT_ERROR(w.run(), "node 'up' (Upsample): attribute mode=\"bicubic\" is not one of");
  G v(7);
  v.node("Upsample", {v.in("x", "N,3,8,8")}, {"y"}, {{"scales", std::vector<float>{2, 2}}}, "up");
  EXPECT_ERROR(v.run(), "node 'up' (Resize): scales has 2 values; expected 4");
}

} // namespace
} // namespace dtc
