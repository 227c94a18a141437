// Tests of the cost facet (ops/Cost.h): every op in ops/Ops.def has one (the facet completeness
// test), the formulas' values on concrete nodes (MatMul, Gemm, Conv, ConvTranspose, pooling,
// elementwise with broadcasting, views, optimizer updates, collectives), and the errors for
// shapes that are not static.
#include "ops/Cost.h"
#include "ops/OpDef.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dtc {
namespace {

using ir::DType;

/// A graph of nodes built with the Graph API; add() appends a canonical node and infers its
/// output types as the shape-inference pass does.
struct G {
  ir::Graph g;
  ops::ShapeValueMap shapeValues;
  Diagnostics diags;

  ir::Value *in(const std::string &name, const std::vector<int64_t> &dims,
                DType t = DType::kFloat32) {
    ir::Value *v = g.createValue(name, {t, ir::Shape::ofStatic(dims)});
    g.addInput(v);
    return v;
  }
  ir::Value *sym(const std::string &name, ir::Shape shape, DType t = DType::kFloat32) {
    ir::Value *v = g.createValue(name, {t, std::move(shape)});
    g.addInput(v);
    return v;
  }
  ir::Value *ints(const std::string &name, const std::vector<int64_t> &values) {
    return g.addConstant(
        name, ir::TensorData::fromInt64s(name, {static_cast<int64_t>(values.size())}, values));
  }
  /// Adds the node and runs its shape inference; a failure is a test failure.
  ir::Node *add(const std::string &op, const std::vector<ir::Value *> &inputs,
                const std::vector<std::string> &outputs,
                const std::map<std::string, ir::Attribute> &attrs = {},
                const std::string &domain = "") {
    ir::Node *n = g.addNode(op, inputs, outputs, domain, op + "_" + std::to_string(g.numNodes()));
    for (const auto &[k, v] : attrs)
      n->setAttr(k, v);
    const ops::OpDef *def = ops::lookupOp(domain, op);
    EXPECT_NE(def, nullptr) << op;
    if (!def)
      return n;
    Status s = ops::checkTypesAndSetOutputDTypes(*n, def->canonical());
    if (s.isOk()) {
      ops::InferenceContext ctx(*n, shapeValues, diags);
      s = def->infer(ctx);
    }
    EXPECT_TRUE(s.isOk()) << s.message();
    return n;
  }
};

/// nodeCost's value; a failure is a test failure (and returns a NaN cost).
ops::Cost costOf(const ir::Node *n) {
  Expected<ops::Cost> c = ops::nodeCost(*n);
  EXPECT_TRUE(c.hasValue()) << c.status().message();
  if (!c.hasValue())
    return {std::nan(""), std::nan(""), std::nan("")};
  return *c;
}

std::string costError(const ir::Node *n) {
  Expected<ops::Cost> c = ops::nodeCost(*n);
  return c.hasValue() ? "<ok>" : c.status().message();
}

void expectCost(const ir::Node *n, double flops, double read, double written) {
  ops::Cost c = costOf(n);
  EXPECT_EQ(c.flops, flops) << n->where();
  EXPECT_EQ(c.bytesRead, read) << n->where();
  EXPECT_EQ(c.bytesWritten, written) << n->where();
}

// The facet completeness test (DESIGN.md section 4): every op of ops/Ops.def has a schema,
// shape inference and a cost facet. An op added without a cost function fails here by name.
TEST(OpFacets, EveryOpHasEveryFacet) {
  const std::vector<const ops::OpDef *> &defs = ops::allOps();
  ASSERT_GT(defs.size(), 80u);
  for (const ops::OpDef *d : defs) {
    std::string name = (d->domain.empty() ? "" : d->domain + ".") + d->name;
    EXPECT_FALSE(d->versions.empty()) << name << " has no schema";
    EXPECT_TRUE(static_cast<bool>(d->infer)) << name << " has no shape inference";
    EXPECT_TRUE(static_cast<bool>(d->cost)) << name << " has no cost facet";
  }
}

TEST(Cost, MatMul) {
  G g;
  // [2,3] x [3,4]: 2 * M * N * K = 2 * 2 * 4 * 3 = 48; bytes (6 + 12) * 4 read, 8 * 4 written.
  ir::Node *n = g.add("MatMul", {g.in("a", {2, 3}), g.in("b", {3, 4})}, {"y"});
  expectCost(n, 48, 72, 32);
  // Batch broadcast: [5,2,3] x [3,4] -> [5,2,4]: 5 * 48.
  n = g.add("MatMul", {g.in("a3", {5, 2, 3}), g.in("b3", {3, 4})}, {"y3"});
  expectCost(n, 240, (30 + 12) * 4, 40 * 4);
  // [1,2,3] x [7,3,4] -> [7,2,4]: the broadcast batch (7), not A's (1).
  n = g.add("MatMul", {g.in("a4", {1, 2, 3}), g.in("b4", {7, 3, 4})}, {"y4"});
  EXPECT_EQ(costOf(n).flops, 7 * 48);
  // Vector times matrix: [3] x [3,4] -> [4]: 2 * 4 * 3.
  n = g.add("MatMul", {g.in("v", {3}), g.in("b5", {3, 4})}, {"y5"});
  EXPECT_EQ(costOf(n).flops, 24);
}

TEST(Cost, MatMulT) {
  G g;
  // A^T @ B with A [3,2] (transA): M = 2, K = 3, N = 4; alpha 0.5 adds one multiply per output.
  ir::Node *n =
      g.add("MatMulT", {g.in("a", {3, 2}), g.in("b", {3, 4})}, {"y"},
            {{"transA", ir::Attribute(int64_t{1})}, {"alpha", ir::Attribute(0.5f)}}, "ai.dtc");
  expectCost(n, 48 + 8, (6 + 12) * 4, 32);
}

TEST(Cost, GemmTransBAndC) {
  G g;
  // A [2,3], B [4,3] with transB: M = 2, K = 3, N = 4: 2MNK = 48, + MN = 8 for adding C [4].
  ir::Node *n = g.add("Gemm", {g.in("a", {2, 3}), g.in("b", {4, 3}), g.in("c", {4})}, {"y"},
                      {{"transB", ir::Attribute(int64_t{1})}});
  expectCost(n, 56, (6 + 12 + 4) * 4, 8 * 4);
  // alpha != 1 and beta != 1 each add MN.
  n = g.add("Gemm", {g.in("a2", {2, 3}), g.in("b2", {4, 3}), g.in("c2", {2, 4})}, {"y2"},
            {{"transB", ir::Attribute(int64_t{1})},
             {"alpha", ir::Attribute(0.5f)},
             {"beta", ir::Attribute(2.f)}});
  EXPECT_EQ(costOf(n).flops, 48 + 8 + 8 + 8);
  // No C, transA: A [3,2] -> M = 2, K = 3.
  n = g.add("Gemm", {g.in("a3", {3, 2}), g.in("b3", {3, 4})}, {"y3"},
            {{"transA", ir::Attribute(int64_t{1})}});
  EXPECT_EQ(costOf(n).flops, 48);
}

TEST(Cost, Conv) {
  G g;
  // X [1,4,8,8], W [6,2,3,3], group 2, pads 1, strides 2 -> Y [1,6,4,4]:
  // 2 * N * Cout * prod(out) * (Cin / group) * prod(kernel) = 2 * 1 * 6 * 16 * 2 * 9 = 3456,
  // + 96 bias adds.
  ir::Node *n =
      g.add("Conv", {g.in("x", {1, 4, 8, 8}), g.in("w", {6, 2, 3, 3}), g.in("b", {6})}, {"y"},
            {{"group", ir::Attribute(int64_t{2})},
             {"pads", ir::Attribute(std::vector<int64_t>{1, 1, 1, 1})},
             {"strides", ir::Attribute(std::vector<int64_t>{2, 2})}});
  ASSERT_EQ(n->output(0)->type().str(), "f32[1,6,4,4]");
  expectCost(n, 3456 + 96, (256 + 108 + 6) * 4, 96 * 4);
  // Dilations 2, no pads: X [2,2,7,7], W [3,2,3,3] -> Y [2,3,3,3]: 2 * 54 * 18.
  n = g.add("Conv", {g.in("x2", {2, 2, 7, 7}), g.in("w2", {3, 2, 3, 3})}, {"y2"},
            {{"dilations", ir::Attribute(std::vector<int64_t>{2, 2})}});
  ASSERT_EQ(n->output(0)->type().str(), "f32[2,3,3,3]");
  EXPECT_EQ(costOf(n).flops, 2 * 54 * 18);
}

TEST(Cost, ConvTransposeAndConvGrads) {
  G g;
  // X [1,2,3,3], W [2,4,3,3] (C = 2, M/group = 4), strides 2 -> Y [1,4,7,7]: every X element
  // multiplies 4 * 9 weights: 2 * 18 * 36.
  ir::Node *n = g.add("ConvTranspose", {g.in("x", {1, 2, 3, 3}), g.in("w", {2, 4, 3, 3})}, {"y"},
                      {{"strides", ir::Attribute(std::vector<int64_t>{2, 2})}});
  ASSERT_EQ(n->output(0)->type().str(), "f32[1,4,7,7]");
  expectCost(n, 1296, (18 + 72) * 4, 196 * 4);
  // The gradients of Conv X [1,4,8,8] * W [6,2,3,3] (group 2, pads 1, strides 2): each costs
  // the forward's 3456 FLOPs (ConvGradWeight + 96 adds for dB).
  std::map<std::string, ir::Attribute> win = {
      {"kernel_shape", ir::Attribute(std::vector<int64_t>{3, 3})},
      {"pads", ir::Attribute(std::vector<int64_t>{1, 1, 1, 1})},
      {"strides", ir::Attribute(std::vector<int64_t>{2, 2})},
      {"group", ir::Attribute(int64_t{2})}};
  std::map<std::string, ir::Attribute> dataAttrs = win;
  dataAttrs["input_shape"] = ir::Attribute(std::vector<int64_t>{1, 4, 8, 8});
  ir::Value *dy = g.in("dy", {1, 6, 4, 4});
  n = g.add("ConvGradData", {dy, g.in("w2", {6, 2, 3, 3})}, {"dx"}, dataAttrs, "ai.dtc");
  expectCost(n, 3456, (96 + 108) * 4, 256 * 4);
  n = g.add("ConvGradWeight", {dy, g.in("x2", {1, 4, 8, 8})}, {"dw", "db"}, win, "ai.dtc");
  ASSERT_EQ(n->output(0)->type().str(), "f32[6,2,3,3]");
  expectCost(n, 3456 + 96, (96 + 256) * 4, (108 + 6) * 4);
}

TEST(Cost, Pooling) {
  G g;
  // MaxPool 2x2 stride 2 on [1,1,4,4] -> [1,1,2,2]: 4 windows of 4 elements.
  ir::Value *x = g.in("x", {1, 1, 4, 4});
  std::map<std::string, ir::Attribute> a = {
      {"kernel_shape", ir::Attribute(std::vector<int64_t>{2, 2})},
      {"strides", ir::Attribute(std::vector<int64_t>{2, 2})}};
  expectCost(g.add("MaxPool", {x}, {"y"}, a), 16, 64, 16);
  EXPECT_EQ(costOf(g.add("AveragePool", {x}, {"y2"}, a)).flops, 16);
  // Global: one add per input element.
  EXPECT_EQ(costOf(g.add("GlobalAveragePool", {x}, {"y3"})).flops, 16);
}

TEST(Cost, ElementwiseWithBroadcast) {
  G g;
  // [2,3] + [3] -> [2,3]: one FLOP per output element; B is read once (3 elements).
  ir::Node *n = g.add("Add", {g.in("a", {2, 3}), g.in("b", {3})}, {"y"});
  expectCost(n, 6, (6 + 3) * 4, 6 * 4);
  // [4,1] * [1,5] -> [4,5]: 20 FLOPs from 9 elements read.
  n = g.add("Mul", {g.in("c", {4, 1}), g.in("d", {1, 5})}, {"z"});
  expectCost(n, 20, 9 * 4, 20 * 4);
  // Transcendental unary ops count 1 per element; f64 elements are 8 bytes.
  n = g.add("Exp", {g.in("e", {7}, DType::kFloat64)}, {"ex"});
  expectCost(n, 7, 56, 56);
  // Softmax: 5 per element.
  EXPECT_EQ(costOf(g.add("Softmax", {g.in("s", {2, 5})}, {"sm"})).flops, 50);
  // LogSoftmax: 5 per element + a log per row.
  EXPECT_EQ(costOf(g.add("LogSoftmax", {g.in("s2", {2, 5})}, {"lsm"})).flops, 52);
}

TEST(Cost, ViewsAndDataMovement) {
  G g;
  ir::Value *x = g.in("x", {2, 3, 4});
  // A view aliases its input: no FLOPs, no bytes.
  expectCost(g.add("Reshape", {x, g.ints("shape", {6, 4})}, {"r"}), 0, 0, 0);
  expectCost(g.add("Identity", {x}, {"i"}), 0, 0, 0);
  // Transpose moves every element: 0 FLOPs, 96 bytes each way.
  expectCost(
      g.add("Transpose", {x}, {"t"}, {{"perm", ir::Attribute(std::vector<int64_t>{2, 0, 1})}}), 0,
      96, 96);
  // Shape reads no tensor data and writes 3 int64s.
  expectCost(g.add("Shape", {x}, {"s"}), 0, 0, 24);
}

TEST(Cost, Reductions) {
  G g;
  ir::Value *x = g.in("x", {4, 6});
  ir::Value *axes = g.ints("axes", {1});
  EXPECT_EQ(costOf(g.add("ReduceSum", {x, axes}, {"s"})).flops, 24);
  // ReduceMean: the adds plus a divide per output element (4).
  EXPECT_EQ(costOf(g.add("ReduceMean", {x, axes}, {"m"})).flops, 28);
}

TEST(Cost, NormalizationAndLoss) {
  G g;
  // BatchNormalization inference on [2,3,4,4] (96 elements, 3 channels): 4 * 96 + 2 * 3.
  ir::Node *n = g.add(
      "BatchNormalization",
      {g.in("x", {2, 3, 4, 4}), g.in("sc", {3}), g.in("b", {3}), g.in("mu", {3}), g.in("var", {3})},
      {"y"});
  EXPECT_EQ(costOf(n).flops, 4 * 96 + 2 * 3);
  // LayerNormalization over the last axis of [4,8] with Scale and B: 8 * 32 + 5 * 4 rows.
  n = g.add("LayerNormalization", {g.in("lx", {4, 8}), g.in("ls", {8}), g.in("lb", {8})}, {"ly"});
  EXPECT_EQ(costOf(n).flops, 8 * 32 + 5 * 4);
  // SoftmaxCrossEntropyLoss, scores [4,10], labels [4], mean: 5 * 40 + 2 * 4 + (4 + 1).
  n = g.add("SoftmaxCrossEntropyLoss",
            {g.in("scores", {4, 10}), g.in("labels", {4}, DType::kInt64)}, {"loss"});
  expectCost(n, 200 + 8 + 5, (40 * 4) + (4 * 8), 4);
}

TEST(Cost, AdamUpdate) {
  G g;
  ir::Value *p = g.in("p", {10}), *gr = g.in("g", {10}), *lr = g.in("lr", {});
  ir::Value *step = g.in("step", {}, DType::kInt64), *m = g.in("m", {10}), *v = g.in("v", {10});
  // 13 FLOPs per element (m 3, v 4, update 6); reads four f32[10] (160 bytes), lr (4) and step
  // (8); writes param, exp_avg and exp_avg_sq (120 bytes).
  ir::Node *n = g.add("Adam", {p, gr, lr, step, m, v}, {"p1", "m1", "v1"}, {}, "ai.dtc");
  expectCost(n, 130, 172, 120);
  // L2 weight decay (Adam) adds 2 per element; the decoupled one (AdamW) 1; grad_scale 1.
  n = g.add("Adam", {p, gr, lr, step, m, v}, {"p2", "m2", "v2"},
            {{"weight_decay", ir::Attribute(0.01f)}}, "ai.dtc");
  EXPECT_EQ(costOf(n).flops, 150);
  n = g.add("AdamW", {p, gr, lr, step, m, v, g.in("gs", {})}, {"p3", "m3", "v3"},
            {{"weight_decay", ir::Attribute(0.01f)}}, "ai.dtc");
  expectCost(n, 150, 176, 120);
}

TEST(Cost, SgdAndClipping) {
  G g;
  ir::Value *p = g.in("p", {8}), *gr = g.in("g", {8}), *lr = g.in("lr", {});
  EXPECT_EQ(costOf(g.add("SGD", {p, gr, lr}, {"p1"}, {}, "ai.dtc")).flops, 16);
  // momentum + nesterov: 2 + 4 per element.
  ir::Node *n =
      g.add("SGD", {p, gr, lr, g.in("buf", {8})}, {"p2", "b2"},
            {{"momentum", ir::Attribute(0.9f)}, {"nesterov", ir::Attribute(int64_t{1})}}, "ai.dtc");
  EXPECT_EQ(costOf(n).flops, 48);
  // SumSquares: a square and an add per element of every input.
  EXPECT_EQ(costOf(g.add("SumSquares", {p, g.in("q", {3, 4})}, {"ss"}, {}, "ai.dtc")).flops,
            2 * (8 + 12));
}

TEST(Cost, AllReduceMovesBytesOnly) {
  G g;
  // A bucket of two gradients: 0 local FLOPs, (100 + 50) f64 elements each way.
  ir::Node *n =
      g.add("AllReduce", {g.in("a", {100}, DType::kFloat64), g.in("b", {50}, DType::kFloat64)},
            {"ra", "rb"}, {}, "ai.dtc");
  expectCost(n, 0, 1200, 1200);
}

TEST(Cost, ShapesMustBeStatic) {
  G g;
  ir::Shape batch({ir::Dim::symbol("N"), ir::Dim::fixed(3)});
  ir::Node *n = g.add("MatMul", {g.sym("a", batch), g.in("b", {3, 4})}, {"y"});
  EXPECT_EQ(costError(n), "node 'MatMul_0' (MatMul): cost needs static shapes: input 0 'a' has "
                          "type f32[N,3]");
  n = g.add("Relu", {g.sym("u", ir::Shape::unknownRank())}, {"r"});
  EXPECT_EQ(costError(n), "node 'Relu_1' (Relu): cost needs static shapes: input 0 'u' has type "
                          "f32[*]");
  Expected<ops::Cost> total = ops::graphCost(g.g);
  ASSERT_FALSE(total.hasValue());
  EXPECT_NE(total.status().message().find("MatMul_0"), std::string::npos);
}

TEST(Cost, UnknownOpAndGraphSum) {
  G g;
  ir::Node *n = g.g.addNode("NoSuchOp", {g.in("x", {2})}, {"y"}, "", "bad");
  EXPECT_EQ(costError(n), "node 'bad' (NoSuchOp): cost: unknown operator 'NoSuchOp'");
  G h;
  ir::Value *a = h.in("a", {2, 3});
  ir::Node *mm = h.add("MatMul", {a, h.in("b", {3, 4})}, {"y"});
  h.add("Relu", {mm->output(0)}, {"z"});
  Expected<ops::Cost> total = ops::graphCost(h.g);
  ASSERT_TRUE(total.hasValue()) << total.status().message();
  EXPECT_EQ(total->flops, 48 + 8);
  EXPECT_EQ(total->bytesRead, 72 + 32);
  EXPECT_EQ(total->bytesWritten, 32 + 32);
  EXPECT_DOUBLE_EQ(total->intensity(), 56.0 / 168.0);
}

} // namespace
} // namespace dtc
