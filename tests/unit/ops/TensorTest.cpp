// Unit tests of the tensor/shape operator definitions (ops/tensor/): shape and type inference
// (symbolic batches included), data propagation of shape tensors, constant folding,
// normalization of older opset forms, and the errors each op reports.
#include "ops/OpDef.h"
#include "passes/Passes.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstring>

namespace dtc {
namespace {

using ir::Dim;
using ir::DType;
using ir::Shape;

Shape sym(std::initializer_list<const char *> dims) {
  std::vector<Dim> out;
  for (const char *d : dims) {
    std::string s = d;
    if (s == "?")
      out.push_back(Dim::unknown());
    else if (std::isdigit(static_cast<unsigned char>(s[0])))
      out.push_back(Dim::fixed(std::stoll(s)));
    else
      out.push_back(Dim::symbol(s));
  }
  return Shape(std::move(out));
}

/// Builds small graphs with the Graph API and runs shape inference / normalization / folding.
class TensorOps : public ::testing::Test {
protected:
  ir::Value *input(const std::string &name, DType t, Shape s) {
    ir::Value *v = g.createValue(name, {t, std::move(s)});
    g.addInput(v);
    return v;
  }
  ir::Value *i64(const std::string &name, std::vector<int64_t> dims,
                 const std::vector<int64_t> &values) {
    return g.addConstant(name, ir::TensorData::fromInt64s(name, std::move(dims), values));
  }
  ir::Value *i64s(const std::string &name, const std::vector<int64_t> &values) {
    return i64(name, {static_cast<int64_t>(values.size())}, values);
  }
  ir::Value *f32(const std::string &name, std::vector<int64_t> dims,
                 const std::vector<float> &values) {
    return g.addConstant(name, ir::TensorData::fromFloats(name, std::move(dims), values));
  }
  ir::Value *i32s(const std::string &name, const std::vector<int32_t> &values) {
    std::string bytes(values.size() * 4, '\0');
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return g.addConstant(name,
                         ir::TensorData::fromBytes(name, DType::kInt32,
                                                   {static_cast<int64_t>(values.size())}, bytes));
  }
  ir::Node *node(const std::string &op, const std::vector<ir::Value *> &ins,
                 const std::vector<std::string> &outs,
                 const std::map<std::string, ir::Attribute> &attrs = {}) {
    ir::Node *n = g.addNode(op, ins, outs, "", op + "_" + std::to_string(g.numNodes()));
    for (const auto &[k, v] : attrs)
      n->setAttr(k, v);
    return n;
  }
  Status infer() {
    passes::PassContext ctx;
    return passes::createShapeInferencePass()->run(g, ctx);
  }
  std::string type(const std::string &name) {
    const ir::Value *v = g.findValue(name);
    return v ? v->type().str() : "<missing>";
  }
  std::string inferError() {
    Status s = infer();
    return s.isOk() ? "<ok>" : s.message();
  }
  /// Checks `n` against the form of `opset`, normalizes it, and checks the canonical form.
  Status normalize(ir::Node *n, int64_t opset) {
    const ops::OpDef *def = ops::lookupOp("", n->opType());
    const ops::OpVersion *v = def->versionFor(opset);
    if (!v)
      return Status::error(n->where(), "no form at this opset");
    DTC_RETURN_IF_ERROR(ops::checkForm(*n, *v, opset));
    if (def->normalize) {
      Diagnostics diags;
      ops::NormalizeContext ctx(g, opset, diags);
      DTC_RETURN_IF_ERROR(def->normalize(*n, ctx));
    }
    return ops::checkForm(*n, def->canonical(), def->canonical().since);
  }
  /// Folds `n` on the initializers feeding it.
  Expected<std::vector<ir::TensorDataPtr>> fold(ir::Node *n) {
    std::vector<ir::TensorDataPtr> ins;
    for (ir::Value *v : n->inputs())
      ins.push_back(v ? v->initializer() : nullptr);
    ops::FoldContext ctx(*n, ins);
    return ops::lookupOp("", n->opType())->fold(ctx);
  }
  std::vector<int64_t> foldInts(ir::Node *n, size_t out = 0, std::vector<int64_t> *dims = nullptr) {
    auto r = fold(n);
    EXPECT_TRUE(r.hasValue()) << r.status().message();
    if (!r)
      return {};
    if (dims)
      *dims = (*r)[out]->dims();
    auto ints = (*r)[out]->toInt64s();
    EXPECT_TRUE(ints.hasValue());
    return ints ? *ints : std::vector<int64_t>{};
  }
  std::vector<double> foldDoubles(ir::Node *n, size_t out = 0) {
    auto r = fold(n);
    EXPECT_TRUE(r.hasValue()) << r.status().message();
    if (!r)
      return {};
    auto d = (*r)[out]->toDoubles();
    EXPECT_TRUE(d.hasValue());
    return d ? *d : std::vector<double>{};
  }
  std::vector<int64_t> constInts(const ir::Node *n, size_t i) {
    const ir::Value *v = n->input(i);
    if (!v || !v->initializer())
      return {-999};
    return *v->initializer()->toInt64s();
  }

  ir::Graph g;
};

using V = std::vector<int64_t>;
using D = std::vector<double>;

// --- Constant, ConstantOfShape, Shape ---------------------------------------------------------

TEST_F(TensorOps, TensorConstantForms) {
  node("Constant", {}, {"a"},
       {{"value", ir::TensorDataPtr(ir::TensorData::fromFloats("t", {2, 2}, {1, 2, 3, 4}))}});
  node("Constant", {}, {"b"}, {{"value_ints", V{4, 5, 6}}});
  node("Constant", {}, {"c"}, {{"value_float", 2.5f}});
  node("Constant", {}, {"d"}, {{"value_int", int64_t{7}}});
  node("Constant", {}, {"e"}, {{"value_strings", std::vector<std::string>{"x", "y"}}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[2,2]");
  EXPECT_EQ(type("b"), "i64[3]");
  EXPECT_EQ(type("c"), "f32[]");
  EXPECT_EQ(type("d"), "i64[]");
  EXPECT_EQ(type("e"), "string[2]");
  EXPECT_EQ(foldInts(g.findValue("b")->producer()), (V{4, 5, 6}));
  EXPECT_EQ(foldDoubles(g.findValue("c")->producer()), (D{2.5}));
}

TEST_F(TensorOps, TensorConstantNeedsExactlyOneValue) {
  ir::Node *n = node("Constant", {}, {"a"}, {{"value_int", int64_t{1}}, {"value_float", 1.0f}});
  EXPECT_NE(inferError().find("exactly one value attribute"), std::string::npos);
  EXPECT_FALSE(normalize(n, 13));
  // value_int is not part of the opset-11 form.
  ir::Node *m = node("Constant", {}, {"b"}, {{"value_int", int64_t{1}}});
  Status s = normalize(m, 11);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("'value_int' is not allowed"), std::string::npos) << s.message();
  EXPECT_TRUE(normalize(m, 12));
}

TEST_F(TensorOps, TensorConstantOfShape) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3"}));
  ir::Node *sh = node("Shape", {x}, {"s"});
  (void)sh;
  node("ConstantOfShape", {g.findValue("s")}, {"z"});
  auto one = ir::TensorData::fromInt64s("v", {1}, {5});
  ir::Node *c =
      node("ConstantOfShape", {i64s("shp", {2, 3})}, {"w"}, {{"value", ir::TensorDataPtr(one)}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("z"), "f32[N,3]");
  EXPECT_EQ(type("w"), "i64[2,3]");
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(c, 0, &dims), (V{5, 5, 5, 5, 5, 5}));
  EXPECT_EQ(dims, (V{2, 3}));
  ir::Node *f = node("ConstantOfShape", {i64s("shp2", {2})}, {"f"});
  EXPECT_EQ(foldDoubles(f), (D{0, 0}));
}

TEST_F(TensorOps, TensorConstantOfShapeRejectsInt32Shape) {
  node("ConstantOfShape", {i32s("shp", {2, 3})}, {"w"});
  std::string e = inferError();
  EXPECT_NE(e.find("node 'ConstantOfShape_0' (ConstantOfShape): input 0 ('input', value 'shp') "
                   "has type i32; allowed: i64"),
            std::string::npos)
      << e;
}

TEST_F(TensorOps, TensorShapeWithStartEnd) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3", "4", "5"}));
  node("Shape", {x}, {"s"});
  node("Shape", {x}, {"s1"}, {{"start", int64_t{1}}, {"end", int64_t{-1}}});
  node("Shape", {x}, {"s2"}, {{"start", int64_t{-10}}, {"end", int64_t{100}}});
  node("Shape", {x}, {"s3"}, {{"start", int64_t{3}}, {"end", int64_t{1}}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("s"), "i64[4]");
  EXPECT_EQ(type("s1"), "i64[2]");
  EXPECT_EQ(type("s2"), "i64[4]");
  EXPECT_EQ(type("s3"), "i64[0]");
  // start/end are opset-15 attributes.
  ir::Node *n = g.findValue("s1")->producer();
  EXPECT_FALSE(normalize(n, 14));
  EXPECT_TRUE(normalize(n, 15));
}

TEST_F(TensorOps, TensorShapeFoldsStaticInput) {
  ir::Value *x = input("x", DType::kFloat32, sym({"2", "3", "4"}));
  ir::Node *n = node("Shape", {x}, {"s"}, {{"start", int64_t{1}}});
  EXPECT_EQ(foldInts(n), (V{3, 4}));
  ir::Value *y = input("y", DType::kFloat32, sym({"N", "3"}));
  ir::Node *m = node("Shape", {y}, {"t"});
  EXPECT_FALSE(fold(m).hasValue());
}

// --- Reshape and the PyTorch dynamic-batch chain -------------------------------------------

TEST_F(TensorOps, TensorReshapeSymbolic) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3", "4"}));
  node("Reshape", {x, i64s("s1", {-1, 12})}, {"a"});
  node("Reshape", {g.findValue("a"), i64s("s2", {0, 3, 4})}, {"b"});
  node("Reshape", {x, i64s("s3", {0, -1})}, {"c"});
  node("Reshape", {x, i64s("s4", {-1})}, {"d"});
  node("Reshape", {x, i64s("s5", {0, -1, 2})}, {"e"}, {{"allowzero", int64_t{0}}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,12]");
  EXPECT_EQ(type("b"), "f32[N,3,4]");
  EXPECT_EQ(type("c"), "f32[N,12]");
  EXPECT_EQ(type("d"), "f32[12*N]");
  EXPECT_EQ(type("e"), "f32[N,6,2]");
}

TEST_F(TensorOps, TensorReshapeErrors) {
  ir::Value *x = input("x", DType::kFloat32, sym({"2", "3", "4"}));
  ir::Node *a = node("Reshape", {x, i64s("s1", {-1, -1})}, {"a"});
  EXPECT_NE(inferError().find("at most one dimension may be -1"), std::string::npos);
  a->setInput(1, i64s("s2", {5, 5}));
  EXPECT_NE(inferError().find("cannot reshape [2,3,4] (24 elements) into [5,5] (25 elements)"),
            std::string::npos)
      << inferError();
  a->setInput(1, i64s("s3", {-1, 0}));
  a->setAttr("allowzero", int64_t{1});
  EXPECT_NE(inferError().find("both -1 and 0 with allowzero=1"), std::string::npos);
  a->setInput(1, i64s("s4", {-1, 5}));
  a->removeAttr("allowzero");
  EXPECT_NE(inferError().find("node 'Reshape_0' (Reshape): cannot reshape"), std::string::npos)
      << inferError();
  a->setInput(1, i64s("s5", {24, 1, 0, 0}));
  EXPECT_NE(inferError().find("is 0 (copy the input dimension) but the input has rank 3"),
            std::string::npos);
}

TEST_F(TensorOps, TensorReshapeAllowZero) {
  ir::Value *x = input("x", DType::kFloat32, sym({"0", "3"}));
  node("Reshape", {x, i64s("s", {3, 0})}, {"a"}, {{"allowzero", int64_t{1}}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[3,0]");
  // allowzero is an opset-14 attribute.
  EXPECT_FALSE(normalize(g.findValue("a")->producer(), 13));
  EXPECT_TRUE(normalize(g.findValue("a")->producer(), 14));
}

TEST_F(TensorOps, TensorReshapeRejectsInt32Shape) {
  ir::Value *x = input("x", DType::kFloat32, sym({"2", "3"}));
  node("Reshape", {x, i32s("s", {3, 2})}, {"a"});
  std::string e = inferError();
  EXPECT_NE(e.find("input 1 ('shape', value 's') has type i32; allowed: i64"), std::string::npos)
      << e;
}

TEST_F(TensorOps, TensorReshapeUnknownShapeKeepsRank) {
  ir::Value *x = input("x", DType::kFloat32, sym({"2", "3"}));
  ir::Value *s = input("s", DType::kInt64, sym({"3"}));
  node("Reshape", {x, s}, {"a"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[?,?,?]");
}

TEST_F(TensorOps, TensorDynamicBatchChain) {
  // PyTorch's x.view(x.size(0), -1): Shape -> Gather(0) -> Unsqueeze -> Concat([-1]) -> Reshape.
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "1", "28", "28"}));
  node("Shape", {x}, {"shape"});
  node("Gather", {g.findValue("shape"), i64("zero", {}, {0})}, {"batch"}, {{"axis", int64_t{0}}});
  node("Unsqueeze", {g.findValue("batch"), i64s("axes0", {0})}, {"batch1"});
  node("Concat", {g.findValue("batch1"), i64s("minus1", {-1})}, {"target"}, {{"axis", int64_t{0}}});
  node("Reshape", {x, g.findValue("target")}, {"flat"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("shape"), "i64[4]");
  EXPECT_EQ(type("batch"), "i64[]");
  EXPECT_EQ(type("batch1"), "i64[1]");
  EXPECT_EQ(type("target"), "i64[2]");
  EXPECT_EQ(type("flat"), "f32[N,784]");
}

TEST_F(TensorOps, TensorShapeValueThroughSliceAndSqueeze) {
  // x.shape[1:] via Slice, and a scalar via Squeeze, feeding Reshape / Expand.
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "S", "8"}));
  node("Shape", {x}, {"shape"});
  node("Slice", {g.findValue("shape"), i64s("st", {0}), i64s("en", {2})}, {"ns"});
  node("Concat", {g.findValue("ns"), i64s("two", {2}), i64s("four", {4})}, {"t"},
       {{"axis", int64_t{0}}});
  node("Reshape", {x, g.findValue("t")}, {"r"});
  node("Slice", {g.findValue("shape"), i64s("st2", {2}), i64s("en2", {3})}, {"last"});
  node("Squeeze", {g.findValue("last")}, {"lasts"});
  node("Unsqueeze", {g.findValue("lasts"), i64s("ax", {0})}, {"last1"});
  node("Concat", {g.findValue("ns"), g.findValue("last1")}, {"t2"}, {{"axis", int64_t{0}}});
  node("Expand", {input("b", DType::kFloat32, sym({"1", "1", "1"})), g.findValue("t2")}, {"e"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("r"), "f32[N,S,2,4]");
  EXPECT_EQ(type("lasts"), "i64[]");
  EXPECT_EQ(type("e"), "f32[N,S,8]");
}

TEST_F(TensorOps, TensorReshapeOfOneElementValue) {
  ir::Value *x = input("x", DType::kFloat32, sym({"B", "7"}));
  node("Shape", {x}, {"shape"});
  node("Gather", {g.findValue("shape"), i64s("i", {0})}, {"b1"});
  node("Reshape", {g.findValue("b1"), i64s("scalar", {})}, {"b0"});
  node("Unsqueeze", {g.findValue("b0"), i64s("a", {0})}, {"b"});
  node("Concat", {g.findValue("b"), i64s("m", {7, 1})}, {"t"}, {{"axis", int64_t{0}}});
  node("Reshape", {x, g.findValue("t")}, {"y"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("b0"), "i64[]");
  EXPECT_EQ(type("y"), "f32[B,7,1]");
}

TEST_F(TensorOps, TensorReshapeFold) {
  ir::Node *n = node("Reshape", {i64("d", {2, 3}, {1, 2, 3, 4, 5, 6}), i64s("s", {3, -1})}, {"r"});
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(n, 0, &dims), (V{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(dims, (V{3, 2}));
}

// --- Flatten, Transpose -----------------------------------------------------------------------

TEST_F(TensorOps, TensorFlatten) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3", "4", "5"}));
  node("Flatten", {x}, {"a"});
  node("Flatten", {x}, {"b"}, {{"axis", int64_t{2}}});
  node("Flatten", {x}, {"c"}, {{"axis", int64_t{0}}});
  node("Flatten", {x}, {"d"}, {{"axis", int64_t{-1}}});
  node("Flatten", {x}, {"e"}, {{"axis", int64_t{4}}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,60]");
  EXPECT_EQ(type("b"), "f32[3*N,20]");
  EXPECT_EQ(type("c"), "f32[1,60*N]");
  EXPECT_EQ(type("d"), "f32[12*N,5]");
  EXPECT_EQ(type("e"), "f32[60*N,1]");
  node("Flatten", {x}, {"f"}, {{"axis", int64_t{5}}});
  EXPECT_NE(inferError().find("axis 5 is out of range for rank 4"), std::string::npos);
}

TEST_F(TensorOps, TensorFlattenNegativeAxisNeedsOpset11) {
  ir::Value *x = input("x", DType::kFloat32, sym({"2", "3"}));
  ir::Node *n = node("Flatten", {x}, {"a"}, {{"axis", int64_t{-1}}});
  Status s = normalize(n, 9);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("negative axis -1 is not allowed before opset 11"), std::string::npos)
      << s.message();
  EXPECT_TRUE(normalize(n, 11));
  ir::Node *m = node("Flatten", {i64("c", {2, 2}, {1, 2, 3, 4})}, {"b"}, {{"axis", int64_t{0}}});
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(m, 0, &dims), (V{1, 2, 3, 4}));
  EXPECT_EQ(dims, (V{1, 4}));
}

TEST_F(TensorOps, TensorTranspose) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3", "4"}));
  node("Transpose", {x}, {"a"});
  node("Transpose", {x}, {"b"}, {{"perm", V{0, 2, 1}}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[4,3,N]");
  EXPECT_EQ(type("b"), "f32[N,4,3]");
  node("Transpose", {x}, {"c"}, {{"perm", V{0, 0, 1}}});
  EXPECT_NE(inferError().find("perm [0,0,1] is not a permutation of the axes of a rank-3 input"),
            std::string::npos);
}

TEST_F(TensorOps, TensorTransposeFold) {
  ir::Node *n = node("Transpose", {i64("c", {2, 3}, {1, 2, 3, 4, 5, 6})}, {"t"});
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(n, 0, &dims), (V{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(dims, (V{3, 2}));
  ir::Node *m =
      node("Transpose", {f32("f", {2, 1, 2}, {1, 2, 3, 4})}, {"u"}, {{"perm", V{2, 0, 1}}});
  EXPECT_EQ(foldDoubles(m), (D{1, 3, 2, 4}));
}

// --- Squeeze, Unsqueeze -----------------------------------------------------------------------

TEST_F(TensorOps, TensorSqueeze) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "1", "3", "1"}));
  node("Squeeze", {x}, {"a"});
  node("Squeeze", {x, i64s("ax", {-1})}, {"b"});
  node("Squeeze", {x, i64s("ax2", {1, 3})}, {"c"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,3]");
  EXPECT_EQ(type("b"), "f32[N,1,3]");
  EXPECT_EQ(type("c"), "f32[N,3]");
  node("Squeeze", {x, i64s("bad", {2})}, {"d"});
  std::string e = inferError();
  EXPECT_NE(e.find("node 'Squeeze_3' (Squeeze): cannot squeeze axis 2 of size 3"),
            std::string::npos)
      << e;
}

TEST_F(TensorOps, TensorSqueezeAttributeFormNormalized) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "1", "3"}));
  ir::Node *n = node("Squeeze", {x}, {"a"}, {{"axes", V{1}}});
  ASSERT_TRUE(normalize(n, 11));
  EXPECT_FALSE(n->hasAttr("axes"));
  ASSERT_EQ(n->numInputs(), 2u);
  EXPECT_EQ(constInts(n, 1), (V{1}));
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,3]");
  // Negative axes only from opset 11; the axes attribute is gone at 13.
  ir::Node *m = node("Squeeze", {x}, {"b"}, {{"axes", V{-2}}});
  EXPECT_FALSE(normalize(m, 10));
  Status s = normalize(m, 13);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("attribute 'axes' is not allowed for Squeeze in opset 13"),
            std::string::npos)
      << s.message();
}

TEST_F(TensorOps, TensorUnsqueeze) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3"}));
  node("Unsqueeze", {x, i64s("a0", {0})}, {"a"});
  node("Unsqueeze", {x, i64s("a1", {-1})}, {"b"});
  node("Unsqueeze", {x, i64s("a2", {1, -1})}, {"c"});
  node("Unsqueeze", {x, i64s("a3", {3, 0})}, {"d"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[1,N,3]");
  EXPECT_EQ(type("b"), "f32[N,3,1]");
  EXPECT_EQ(type("c"), "f32[N,1,3,1]");
  EXPECT_EQ(type("d"), "f32[1,N,3,1]");
  node("Unsqueeze", {x, i64s("a4", {1, 1})}, {"e"});
  EXPECT_NE(inferError().find("axes 1 is repeated"), std::string::npos) << inferError();
}

TEST_F(TensorOps, TensorUnsqueezeFormsByOpset) {
  ir::Value *x = input("x", DType::kFloat32, sym({"3"}));
  ir::Node *n = node("Unsqueeze", {x}, {"a"}, {{"axes", V{0}}});
  ASSERT_TRUE(normalize(n, 9));
  EXPECT_EQ(constInts(n, 1), (V{0}));
  ir::Node *m = node("Unsqueeze", {x, i64s("ax", {0})}, {"b"});
  Status s = normalize(m, 11);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("expects at most 1 inputs in opset 11"), std::string::npos)
      << s.message();
  EXPECT_TRUE(normalize(m, 13));
  ir::Node *k = node("Unsqueeze", {x}, {"c"});
  EXPECT_FALSE(normalize(k, 11)); // axes attribute is required before 13
}

TEST_F(TensorOps, TensorSqueezeUnsqueezeFold) {
  ir::Node *u = node("Unsqueeze", {i64("s", {}, {7}), i64s("a", {0})}, {"u"});
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(u, 0, &dims), (V{7}));
  EXPECT_EQ(dims, (V{1}));
  ir::Node *q = node("Squeeze", {i64("t", {1, 2, 1}, {4, 5})}, {"q"});
  EXPECT_EQ(foldInts(q, 0, &dims), (V{4, 5}));
  EXPECT_EQ(dims, (V{2}));
  ir::Node *q2 = node("Squeeze", {i64("t2", {1, 2, 1}, {4, 5}), i64s("a2", {0})}, {"q2"});
  EXPECT_EQ(foldInts(q2, 0, &dims), (V{4, 5}));
  EXPECT_EQ(dims, (V{2, 1}));
}

// --- Concat, Split ----------------------------------------------------------------------------

TEST_F(TensorOps, TensorConcat) {
  ir::Value *a = input("a", DType::kFloat32, sym({"N", "3"}));
  ir::Value *b = input("b", DType::kFloat32, sym({"N", "5"}));
  ir::Value *c = input("c", DType::kFloat32, sym({"?", "2"}));
  node("Concat", {a, b, c}, {"x"}, {{"axis", int64_t{-1}}});
  node("Concat", {a, a}, {"y"}, {{"axis", int64_t{0}}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("x"), "f32[N,10]");
  EXPECT_EQ(type("y"), "f32[2*N,3]");
  node("Concat", {a, input("d", DType::kFloat32, sym({"4", "3", "1"}))}, {"z"},
       {{"axis", int64_t{0}}});
  EXPECT_NE(inferError().find("all inputs must have the same rank"), std::string::npos);
}

TEST_F(TensorOps, TensorConcatErrors) {
  ir::Value *a = input("a", DType::kFloat32, sym({"2", "3"}));
  ir::Value *b = input("b", DType::kFloat32, sym({"2", "4"}));
  ir::Node *n = node("Concat", {a, b}, {"x"}, {{"axis", int64_t{0}}});
  EXPECT_NE(inferError().find("differs from the other inputs in dimension 1"), std::string::npos)
      << inferError();
  n->removeAttr("axis");
  Status s = normalize(n, 13);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("required attribute 'axis' is missing"), std::string::npos);
  n->setAttr("axis", int64_t{-1});
  EXPECT_FALSE(normalize(n, 10));
  EXPECT_TRUE(normalize(n, 11));
  ir::Value *i = input("i", DType::kInt64, sym({"2"}));
  node("Concat", {a, i}, {"y"}, {{"axis", int64_t{1}}});
  EXPECT_NE(inferError().find("bound to the same type"), std::string::npos) << inferError();
}

TEST_F(TensorOps, TensorConcatFold) {
  ir::Node *n = node("Concat", {i64("a", {2, 1}, {1, 2}), i64("b", {2, 2}, {3, 4, 5, 6})}, {"x"},
                     {{"axis", int64_t{1}}});
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(n, 0, &dims), (V{1, 3, 4, 2, 5, 6}));
  EXPECT_EQ(dims, (V{2, 3}));
  ir::Node *m = node("Concat", {f32("f", {1}, {1.5f}), f32("h", {2}, {2.5f, 3.5f})}, {"y"},
                     {{"axis", int64_t{0}}});
  EXPECT_EQ(foldDoubles(m), (D{1.5, 2.5, 3.5}));
}

TEST_F(TensorOps, TensorSplit) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "8"}));
  node("Split", {x}, {"a", "b", "c"}, {{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}});
  node("Split", {x, i64s("sp", {2, 6})}, {"d", "e"}, {{"axis", int64_t{-1}}});
  ir::Value *y = input("y", DType::kFloat32, sym({"2*N"}));
  (void)y;
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,3]");
  EXPECT_EQ(type("b"), "f32[N,3]");
  EXPECT_EQ(type("c"), "f32[N,2]");
  EXPECT_EQ(type("d"), "f32[N,2]");
  EXPECT_EQ(type("e"), "f32[N,6]");
}

TEST_F(TensorOps, TensorSplitSymbolicAxis) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "4"}));
  node("Concat", {x, x}, {"xx"}, {{"axis", int64_t{0}}});
  node("Split", {g.findValue("xx")}, {"a", "b"}, {{"num_outputs", int64_t{2}}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,4]");
}

TEST_F(TensorOps, TensorSplitErrors) {
  ir::Value *x = input("x", DType::kFloat32, sym({"2", "5"}));
  ir::Node *n = node("Split", {x, i64s("sp", {2, 2})}, {"a", "b"}, {{"axis", int64_t{1}}});
  EXPECT_NE(inferError().find("split [2,2] sums to 4 but the axis has size 5"), std::string::npos)
      << inferError();
  n->setInput(1, i64s("sp2", {1, 1, 3}));
  EXPECT_NE(inferError().find("has 3 entries but the node has 2 outputs"), std::string::npos);
  n->setAttr("num_outputs", int64_t{2});
  EXPECT_NE(inferError().find("not both"), std::string::npos);
  ir::Node *m = node("Split", {x}, {"c", "d", "e", "f"}, {{"axis", int64_t{1}}});
  (void)m;
  n->removeAttr("num_outputs");
  n->setInput(1, i64s("sp3", {2, 3}));
  EXPECT_NE(inferError().find("either input 'split' or attribute 'num_outputs' must be given"),
            std::string::npos)
      << inferError();
  m->setAttr("num_outputs", int64_t{4}); // 5 into 4: chunks of 2 leave -1 for the last
  EXPECT_NE(inferError().find("cannot be split into 4 outputs"), std::string::npos) << inferError();
}

TEST_F(TensorOps, TensorSplitOlderFormsNormalized) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "6"}));
  ir::Node *a = node("Split", {x}, {"a0", "a1"}, {{"axis", int64_t{1}}, {"split", V{2, 4}}});
  ASSERT_TRUE(normalize(a, 11));
  EXPECT_EQ(constInts(a, 1), (V{2, 4}));
  EXPECT_FALSE(a->hasAttr("split"));
  ir::Node *b = node("Split", {x}, {"b0", "b1", "b2"}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(normalize(b, 13));
  EXPECT_EQ(b->attrInt("num_outputs", 0), 3);
  ir::Node *c = node("Split", {x}, {"c0", "c1"}, {{"axis", int64_t{-1}}});
  EXPECT_FALSE(normalize(c, 9));
  g.eraseNode(c);
  ir::Node *d = node("Split", {x}, {"d0", "d1"}, {{"num_outputs", int64_t{2}}});
  EXPECT_FALSE(normalize(d, 17)); // num_outputs is an opset-18 attribute
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a1"), "f32[N,4]");
  EXPECT_EQ(type("b2"), "f32[N,2]");
}

TEST_F(TensorOps, TensorSplitFold) {
  ir::Node *n = node("Split", {i64("c", {2, 3}, {1, 2, 3, 4, 5, 6})}, {"a", "b"},
                     {{"axis", int64_t{1}}, {"num_outputs", int64_t{2}}});
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(n, 0, &dims), (V{1, 2, 4, 5}));
  EXPECT_EQ(dims, (V{2, 2}));
  EXPECT_EQ(foldInts(n, 1, &dims), (V{3, 6}));
  EXPECT_EQ(dims, (V{2, 1}));
}

// --- Slice ------------------------------------------------------------------------------------

TEST_F(TensorOps, TensorSlice) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "10", "6"}));
  node("Slice", {x, i64s("s0", {1}), i64s("e0", {INT64_MAX}), i64s("a0", {1})}, {"a"});
  node("Slice",
       {x, i64s("s1", {-1, 0}), i64s("e1", {INT64_MIN, INT64_MAX}), i64s("a1", {1, 0}),
        i64s("st1", {-2, 1})},
       {"b"});
  node("Slice", {x, i64s("s2", {2}), i64s("e2", {-2}), i64s("a2", {-1})}, {"c"});
  node("Slice", {x, i64s("s3", {0}), i64s("e3", {2}), i64s("a3", {0})}, {"d"});
  node("Slice", {x, i64s("s4", {20}), i64s("e4", {30}), i64s("a4", {1})}, {"e"});
  node("Slice",
       {x, i64s("s5", {INT64_MAX}), i64s("e5", {INT64_MIN}), i64s("a5", {0}), i64s("st5", {-1})},
       {"f"});
  node("Slice", {x, i64s("s6", {0}), i64s("e6", {6}), i64s("a6", {2}), i64s("st6", {4})}, {"h"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,9,6]");
  EXPECT_EQ(type("b"), "f32[N,5,6]");
  EXPECT_EQ(type("c"), "f32[N,10,2]");
  EXPECT_EQ(type("d"), "f32[?,10,6]");
  EXPECT_EQ(type("e"), "f32[N,0,6]");
  EXPECT_EQ(type("f"), "f32[N,10,6]");
  EXPECT_EQ(type("h"), "f32[N,10,2]");
}

TEST_F(TensorOps, TensorSliceErrorsAndInt32Indices) {
  ir::Value *x = input("x", DType::kFloat32, sym({"4", "4"}));
  node("Slice", {x, i32s("s", {1}), i32s("e", {3})}, {"a"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[2,4]");
  node("Slice", {x, i64s("s2", {0}), i64s("e2", {3}), i64s("a2", {0}), i64s("st2", {0})}, {"b"});
  EXPECT_NE(inferError().find("slice step must not be 0"), std::string::npos);
  g.eraseNode(g.findValue("b")->producer());
  node("Slice", {x, i64s("s3", {0}), i64s("e3", {3}), i32s("a3", {0})}, {"c"});
  EXPECT_NE(inferError().find("bound to the same type"), std::string::npos) << inferError();
}

TEST_F(TensorOps, TensorSliceAttributeFormNormalized) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "8"}));
  ir::Node *n = node("Slice", {x}, {"a"}, {{"starts", V{1}}, {"ends", V{-1}}, {"axes", V{1}}});
  ASSERT_TRUE(normalize(n, 9));
  EXPECT_EQ(constInts(n, 1), (V{1}));
  EXPECT_EQ(constInts(n, 2), (V{-1}));
  EXPECT_EQ(constInts(n, 3), (V{1}));
  EXPECT_TRUE(n->attributes().empty());
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,6]");
  ir::Node *m = node("Slice", {x}, {"b"}, {{"starts", V{0}}, {"ends", V{1}}});
  Status s = normalize(m, 10);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("expects at least 3 inputs in opset 10, got 1"), std::string::npos)
      << s.message();
}

TEST_F(TensorOps, TensorSliceFold) {
  ir::Node *n = node("Slice",
                     {i64("c", {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), i64s("s", {-1, 3}),
                      i64s("e", {INT64_MIN, 0}), i64s("a", {0, 1}), i64s("st", {-1, -2})},
                     {"y"});
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(n, 0, &dims), (V{8, 6, 4, 2}));
  EXPECT_EQ(dims, (V{2, 2}));
  // Step 1 on the last axis: rows are copied whole (remapRuns), with the same result as element
  // by element; a negative start, a step on an outer axis, an end past the dim.
  V c(3 * 4 * 5);
  for (size_t k = 0; k < c.size(); ++k)
    c[k] = static_cast<int64_t>(k);
  ir::Node *m = node("Slice",
                     {i64("c3", {3, 4, 5}, c), i64s("s3", {0, -3, 1}), i64s("e3", {3, 100, 4}),
                      i64s("a3", {0, 1, 2}), i64s("st3", {2, 1, 1})},
                     {"y3"});
  V want;
  for (int64_t i : {0, 2})
    for (int64_t j = 1; j < 4; ++j)
      for (int64_t k = 1; k < 4; ++k)
        want.push_back(i * 20 + j * 5 + k);
  EXPECT_EQ(foldInts(m, 0, &dims), want);
  EXPECT_EQ(dims, (V{2, 3, 3}));
  // A last axis of one element and an empty result take the element path.
  ir::Node *one = node(
      "Slice",
      {i64("c1", {2, 3}, {1, 2, 3, 4, 5, 6}), i64s("s1", {2}), i64s("e1", {3}), i64s("a1", {1})},
      {"y1"});
  EXPECT_EQ(foldInts(one, 0, &dims), (V{3, 6}));
  EXPECT_EQ(dims, (V{2, 1}));
}

// --- Gather -----------------------------------------------------------------------------------

TEST_F(TensorOps, TensorGather) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "5", "4"}));
  ir::Value *idx = input("idx", DType::kInt32, sym({"B", "7"}));
  node("Gather", {x, idx}, {"a"}, {{"axis", int64_t{1}}});
  node("Gather", {x, i64("i0", {}, {-1})}, {"b"}, {{"axis", int64_t{-1}}});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,B,7,4]");
  EXPECT_EQ(type("b"), "f32[N,5]");
  node("Gather", {x, i64("i1", {}, {5})}, {"c"}, {{"axis", int64_t{1}}});
  EXPECT_NE(inferError().find("index 5 is out of range for axis 1 of size 5"), std::string::npos);
}

TEST_F(TensorOps, TensorGatherNegativeIndexNeedsOpset11) {
  ir::Value *x = input("x", DType::kFloat32, sym({"3"}));
  ir::Node *n = node("Gather", {x, i64s("i", {-1})}, {"a"});
  Status s = normalize(n, 10);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("negative index -1 is not allowed before opset 11"),
            std::string::npos);
  EXPECT_TRUE(normalize(n, 11));
}

TEST_F(TensorOps, TensorGatherFoldAndPropagation) {
  ir::Node *n = node("Gather", {i64("c", {3, 2}, {1, 2, 3, 4, 5, 6}), i64s("i", {2, -3})}, {"y"});
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(n, 0, &dims), (V{5, 6, 1, 2}));
  EXPECT_EQ(dims, (V{2, 2}));
  ir::Node *m = node("Gather", {i64("d", {2, 3}, {1, 2, 3, 4, 5, 6}), i64("j", {}, {1})}, {"z"},
                     {{"axis", int64_t{1}}});
  EXPECT_EQ(foldInts(m, 0, &dims), (V{2, 5}));
  EXPECT_EQ(dims, (V{2}));
  // Shape(x)[-1] as a Tile repeat.
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3"}));
  node("Shape", {x}, {"s"});
  node("Gather", {g.findValue("s"), i64s("k", {-1, 0})}, {"sv"});
  node("Tile", {input("t", DType::kFloat32, sym({"2", "1"})), g.findValue("sv")}, {"tiled"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("tiled"), "f32[6,N]");
}

// --- Expand, Tile, Pad, Range -----------------------------------------------------------------

TEST_F(TensorOps, TensorExpand) {
  ir::Value *x = input("x", DType::kFloat32, sym({"3", "1"}));
  node("Expand", {x, i64s("s", {2, 1, 4})}, {"a"});
  node("Expand", {x, i64s("s1", {1})}, {"b"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[2,3,4]");
  EXPECT_EQ(type("b"), "f32[3,1]");
  node("Expand", {x, i64s("s2", {2, 2})}, {"c"});
  EXPECT_NE(inferError().find("cannot be broadcast"), std::string::npos);
}

TEST_F(TensorOps, TensorExpandFoldAndInt32Shape) {
  ir::Node *n = node("Expand", {i64("c", {2, 1}, {1, 2}), i64s("s", {2, 3})}, {"y"});
  std::vector<int64_t> dims;
  EXPECT_EQ(foldInts(n, 0, &dims), (V{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(dims, (V{2, 3}));
  node("Expand", {i64("d", {1}, {1}), i32s("s32", {3})}, {"z"});
  EXPECT_NE(inferError().find("has type i32; allowed: i64"), std::string::npos);
}

TEST_F(TensorOps, TensorTile) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3"}));
  node("Tile", {x, i64s("r", {2, 3})}, {"a"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[2*N,9]");
  ir::Node *f = node("Tile", {i64("c", {2}, {1, 2}), i64s("r2", {3})}, {"t"});
  EXPECT_EQ(foldInts(f), (V{1, 2, 1, 2, 1, 2}));
  node("Tile", {x, i64s("r3", {2})}, {"b"});
  EXPECT_NE(inferError().find("repeats has 1 entries but the input [N,3] has rank 2"),
            std::string::npos)
      << inferError();
}

TEST_F(TensorOps, TensorTileRejectsInt32Repeats) {
  ir::Value *x = input("x", DType::kFloat32, sym({"2"}));
  node("Tile", {x, i32s("r", {2})}, {"a"});
  EXPECT_NE(inferError().find("input 1 ('repeats', value 'r') has type i32; allowed: i64"),
            std::string::npos);
}

TEST_F(TensorOps, TensorPad) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3", "4"}));
  node("Pad", {x, i64s("p", {0, 1, 2, 0, 1, 2})}, {"a"});
  node("Pad", {x, i64s("p2", {2, -1}), nullptr, i64s("ax", {-1})}, {"b"});
  node("Pad", {x, i64s("p3", {1, 0, 1, 0})}, {"c"}, {{"mode", "reflect"}});
  ASSERT_EQ(infer().message(), "node 'Pad_2' (Pad): pads [1,0,1,0] must have 2 entries per "
                               "padded axis (6)");
  g.findValue("c")->producer()->setInput(1, i64s("p4", {0, 2, 3, 0, 0, 0}));
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,5,8]");
  EXPECT_EQ(type("b"), "f32[N,3,5]");
  EXPECT_EQ(type("c"), "f32[N,5,7]");
  g.findValue("c")->producer()->setInput(1, i64s("p5", {0, 3, 0, 0, 0, 0}));
  EXPECT_NE(inferError().find("reflect pads [0,3,0,0,0,0] must be smaller than the size 3"),
            std::string::npos)
      << inferError();
}

TEST_F(TensorOps, TensorPadErrors) {
  ir::Value *x = input("x", DType::kFloat32, sym({"2"}));
  ir::Node *n = node("Pad", {x, i32s("p", {1, 1})}, {"a"});
  EXPECT_NE(inferError().find("input 1 ('pads', value 'p') has type i32; allowed: i64"),
            std::string::npos);
  n->setInput(1, i64s("p2", {-2, -1}));
  EXPECT_NE(inferError().find("negative or overflowing size"), std::string::npos);
  n->setInput(1, i64s("p3", {1, 1}));
  n->setAttr("mode", "mirror");
  EXPECT_NE(inferError().find("unknown pad mode 'mirror'"), std::string::npos);
}

TEST_F(TensorOps, TensorPadOlderFormsNormalized) {
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "3"}));
  ir::Node *a = node("Pad", {x}, {"a"}, {{"pads", V{0, 1, 0, 2}}, {"value", 1.5f}});
  ASSERT_TRUE(normalize(a, 2));
  EXPECT_TRUE(a->attributes().empty());
  EXPECT_EQ(constInts(a, 1), (V{0, 1, 0, 2}));
  ASSERT_NE(a->input(2), nullptr);
  EXPECT_EQ(a->input(2)->type().str(), "f32[]");
  EXPECT_EQ(*a->input(2)->initializer()->toDoubles(), (D{1.5}));
  ir::Node *b = node("Pad", {x}, {"b"}, {{"pads", V{1, 0, 1, 0}}, {"mode", "edge"}});
  ASSERT_TRUE(normalize(b, 10));
  EXPECT_EQ(b->numInputs(), 2u);
  EXPECT_EQ(b->attrString("mode", ""), "edge");
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "f32[N,6]");
  EXPECT_EQ(type("b"), "f32[?,3]");
  // Attribute pads are gone at 11; axes input only from 18; wrap only from 19.
  ir::Node *c = node("Pad", {x}, {"c"}, {{"pads", V{0, 0, 0, 0}}});
  EXPECT_FALSE(normalize(c, 11));
  ir::Node *d = node("Pad", {x, i64s("p", {1, 1}), nullptr, i64s("ax", {1})}, {"d"});
  EXPECT_FALSE(normalize(d, 17));
  EXPECT_TRUE(normalize(d, 18));
  d->setAttr("mode", "wrap");
  Status s = normalize(d, 18);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("wrap needs opset 19"), std::string::npos);
  EXPECT_TRUE(normalize(d, 19));
}

TEST_F(TensorOps, TensorPadFoldModes) {
  ir::Value *c = i64("c", {3}, {1, 2, 3});
  ir::Node *k = node("Pad", {c, i64s("p0", {1, 2}), i64("v", {}, {9})}, {"k"});
  EXPECT_EQ(foldInts(k), (V{9, 1, 2, 3, 9, 9}));
  ir::Node *r = node("Pad", {c, i64s("p1", {2, 2})}, {"r"}, {{"mode", "reflect"}});
  EXPECT_EQ(foldInts(r), (V{3, 2, 1, 2, 3, 2, 1}));
  ir::Node *e = node("Pad", {c, i64s("p2", {1, 2})}, {"e"}, {{"mode", "edge"}});
  EXPECT_EQ(foldInts(e), (V{1, 1, 2, 3, 3, 3}));
  ir::Node *w = node("Pad", {c, i64s("p3", {2, 1})}, {"w"}, {{"mode", "wrap"}});
  EXPECT_EQ(foldInts(w), (V{2, 3, 1, 2, 3, 1}));
  ir::Node *z = node("Pad", {f32("f", {2, 2}, {1, 2, 3, 4}), i64s("p4", {0, 1, 0, -1})}, {"z"});
  EXPECT_EQ(foldDoubles(z), (D{0, 1, 0, 3}));
}

TEST_F(TensorOps, TensorRange) {
  node("Range", {i64("s", {}, {0}), i64("l", {}, {10}), i64("d", {}, {3})}, {"a"});
  node("Range", {i64("s1", {}, {10}), i64("l1", {}, {0}), i64("d1", {}, {-3})}, {"b"});
  node("Range", {f32("s2", {}, {1}), f32("l2", {}, {2}), f32("d2", {}, {0.25f})}, {"c"});
  node("Range",
       {i64("s3", {}, {0}), input("l3", DType::kInt64, Shape(std::vector<Dim>{})),
        i64("d3", {}, {1})},
       {"dd"});
  // Range(0, x.shape[1]) with x symbolic in its batch only.
  ir::Value *x = input("x", DType::kFloat32, sym({"N", "5"}));
  node("Shape", {x}, {"sh"});
  node("Gather", {g.findValue("sh"), i64("one", {}, {1})}, {"len"});
  node("Range", {i64("s4", {}, {0}), g.findValue("len"), i64("d4", {}, {1})}, {"e"});
  ASSERT_TRUE(infer()) << inferError();
  EXPECT_EQ(type("a"), "i64[4]");
  EXPECT_EQ(type("b"), "i64[4]");
  EXPECT_EQ(type("c"), "f32[4]");
  EXPECT_EQ(type("dd"), "i64[?]");
  EXPECT_EQ(type("e"), "i64[5]");
  EXPECT_EQ(foldInts(g.findValue("a")->producer()), (V{0, 3, 6, 9}));
  EXPECT_EQ(foldInts(g.findValue("b")->producer()), (V{10, 7, 4, 1}));
  EXPECT_EQ(foldDoubles(g.findValue("c")->producer()), (D{1, 1.25, 1.5, 1.75}));
}

TEST_F(TensorOps, TensorRangeErrors) {
  ir::Node *n = node("Range", {i64("s", {}, {0}), i64("l", {}, {10}), i64("d", {}, {0})}, {"a"});
  EXPECT_NE(inferError().find("node 'Range_0' (Range): delta must not be 0"), std::string::npos)
      << inferError();
  n->setInput(2, i64s("d2", {1}));
  EXPECT_NE(inferError().find("input 'delta' must be a scalar, got shape [1]"), std::string::npos);
  n->setInput(2, f32("d3", {}, {1}));
  EXPECT_NE(inferError().find("bound to the same type"), std::string::npos);
}

} // namespace
} // namespace dtc
