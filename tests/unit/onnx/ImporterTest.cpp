// Tests of the ONNX importer (compiler/onnx/Importer.h): file formats and bad files, values and
// declared types, every initializer storage form, external data (lazy, and its escapes),
// Constant folding, node ordering, opset checks and the errors that name what is wrong.
#include "compiler/onnx/Importer.h"
#include "ops/OpDef.h"
#include "tests/unit/TempDir.h"

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace dtc::onnxio {
namespace {

namespace fs = std::filesystem;

onnx::ModelProto parseText(const std::string &text) {
  onnx::ModelProto m;
  onnx::OnnxParser parser(text.c_str());
  auto s = parser.Parse(m);
  EXPECT_TRUE(s.IsOK()) << s.ErrorMessage();
  return m;
}

Expected<std::unique_ptr<ir::Graph>> importProto(onnx::ModelProto &m,
                                                 const std::string &dir = ".") {
  Diagnostics diags;
  return importModelProto(m, dir, "model.onnx", diags);
}

Expected<std::unique_ptr<ir::Graph>> importText(const std::string &text) {
  onnx::ModelProto m = parseText(text);
  return importProto(m);
}

/// The error message of a failed import ("" when it succeeded).
template <typename T> std::string errorOf(const Expected<T> &e) {
  return e ? std::string() : e.status().message();
}

/// A fresh temporary folder ("dtc-importer-XXXXXX"), removed at the end of the test.
class TempDir : public dtc::test::TempDir {
public:
  TempDir() : dtc::test::TempDir("dtc-importer") {}
};

const char *kAddModel = R"(
<ir_version: 8, opset_import: ["" : 13], producer_name: "unit", producer_version: "1.0">
g (float[N, 3] x) => (float[N, 3] y) <float[3] w = {1.0, 2.0, 3.0}> {
  y = Add(x, w)
}
)";

// --- basic import ------------------------------------------------------------------------------

TEST(Importer, ImportsValuesNodesAndModelInfo) {
  auto g = importText(kAddModel);
  ASSERT_TRUE(g) << errorOf(g);
  ir::Graph &graph = **g;
  EXPECT_EQ(graph.name(), "g");
  EXPECT_EQ(graph.onnxOpset(), 13);
  EXPECT_EQ(graph.modelInfo().irVersion, 8);
  EXPECT_EQ(graph.modelInfo().producerName, "unit");
  EXPECT_EQ(graph.modelInfo().producerVersion, "1.0");
  EXPECT_EQ(graph.modelInfo().path, "model.onnx");
  ASSERT_EQ(graph.inputs().size(), 1u);
  EXPECT_EQ(graph.inputs()[0]->type().str(), "f32[N,3]");
  ir::Value *w = graph.findValue("w");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->isParameter());
  EXPECT_FALSE(w->isGraphInput());
  EXPECT_EQ(w->type().str(), "f32[3]");
  ASSERT_EQ(graph.numNodes(), 1u);
  ir::Node *add = graph.nodes()[0];
  EXPECT_EQ(add->opType(), "Add");
  EXPECT_EQ(add->name(), "Add_0"); // generated "<OpType>_<index>"
  EXPECT_EQ(add->input(0), graph.inputs()[0]);
  EXPECT_EQ(add->input(1), w);
  ASSERT_EQ(graph.outputs().size(), 1u);
  EXPECT_EQ(graph.outputs()[0]->name(), "y");
  // The declared output type is attached (shape inference treats it as declared).
  EXPECT_EQ(graph.outputs()[0]->type().str(), "f32[N,3]");
}

TEST(Importer, UnnamedDimsGetFreshSymbols) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[?, 3, ?] x, float[unk__0] z) => (float[?, 3, ?] y) { y = Relu(x) }
)");
  ASSERT_TRUE(g) << errorOf(g);
  // unk__0 is declared by the model, so fresh symbols skip it.
  EXPECT_EQ((*g)->findValue("x")->type().str(), "f32[unk__1,3,unk__2]");
  EXPECT_EQ((*g)->findValue("z")->type().str(), "f32[unk__0]");
  // Output dims without a name stay unknown (they are not fresh inputs).
  EXPECT_EQ((*g)->findValue("y")->type().str(), "f32[?,3,?]");
}

TEST(Importer, InitializerListedAsInputIsParameterWithDefault) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x, float[3] b = {1.0, 2.0, 3.0}) => (float[3] y) { y = Add(x, b) }
)");
  ASSERT_TRUE(g) << errorOf(g);
  ir::Value *b = (*g)->findValue("b");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->isGraphInput());
  EXPECT_TRUE(b->isInitializer());
  EXPECT_TRUE(b->isParameter());
  EXPECT_FALSE(b->isConstant());
  EXPECT_EQ((*g)->inputs().size(), 2u);
}

TEST(Importer, InputDefaultWithOtherDTypeIsAnError) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x, int64[3] b) => (float[3] y) <float[3] b = {1.0, 2.0, 3.0}> { y = Add(x, b) }
)");
  EXPECT_EQ(errorOf(g), "input 'b': declared i64 but its default value (initializer) is f32");
}

TEST(Importer, ConstantFormsBecomeConstantInitializers) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y, float[2] t, float s, float[3] fs, int64 i, int64[2] is) {
  t = Constant<value = float[2] {4.0, 5.0}>()
  s = Constant<value_float = 1.5>()
  fs = Constant<value_floats = [1.0, 2.0, 3.0]>()
  i = Constant<value_int = 7>()
  is = Constant<value_ints = [8, 9]>()
  y = Add(x, t)
}
)");
  ASSERT_TRUE(g) << errorOf(g);
  ir::Graph &graph = **g;
  EXPECT_EQ(graph.numNodes(), 1u);
  struct Case {
    const char *name;
    const char *type;
  } cases[] = {{"t", "f32[2]"}, {"s", "f32[]"}, {"fs", "f32[3]"}, {"i", "i64[]"}, {"is", "i64[2]"}};
  for (const Case &c : cases) {
    ir::Value *v = graph.findValue(c.name);
    ASSERT_NE(v, nullptr) << c.name;
    EXPECT_TRUE(v->isConstant()) << c.name;
    EXPECT_EQ(v->producer(), nullptr) << c.name;
    EXPECT_EQ(v->type().str(), c.type) << c.name;
  }
  EXPECT_EQ(*graph.findValue("t")->initializer()->toDoubles(), (std::vector<double>{4.0, 5.0}));
  EXPECT_EQ(*graph.findValue("s")->initializer()->toDoubles(), (std::vector<double>{1.5}));
  EXPECT_EQ(*graph.findValue("fs")->initializer()->toDoubles(),
            (std::vector<double>{1.0, 2.0, 3.0}));
  EXPECT_EQ(*graph.findValue("i")->initializer()->toInt64s(), (std::vector<int64_t>{7}));
  EXPECT_EQ(*graph.findValue("is")->initializer()->toInt64s(), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(graph.nodes()[0]->input(1), graph.findValue("t"));
}

TEST(Importer, ConstantStringAndSparseAreErrors) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { c = Constant<value_string = "hi">()  y = Relu(x) }
)");
  EXPECT_EQ(errorOf(g), "node 'Constant_0' (Constant): string constants (value_string) are not "
                        "supported");
  onnx::ModelProto m = parseText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { c = Constant<value_int = 1>()  y = Relu(x) }
)");
  onnx::AttributeProto *a = m.mutable_graph()->mutable_node(0)->mutable_attribute(0);
  a->Clear();
  a->set_name("sparse_value");
  a->set_type(onnx::AttributeProto::SPARSE_TENSOR);
  a->mutable_sparse_tensor()->mutable_values()->set_data_type(1);
  EXPECT_EQ(errorOf(importProto(m)),
            "node 'Constant_0' (Constant): sparse constants (sparse_value) are not supported");
}

TEST(Importer, ConstantValueIntNeedsOpset12) {
  auto g = importText(R"(
<ir_version: 7, opset_import: ["" : 11]>
g (float[2] x) => (float[2] y) { c = Constant<value_int = 1>()  y = Relu(x) }
)");
  EXPECT_EQ(errorOf(g), "node 'Constant_0' (Constant): attribute 'value_int' needs opset 12 or "
                        "later (the model declares 11)");
}

TEST(Importer, UnsortedNodesAreSorted) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] z) {
  z = Neg(y)
  y = Relu(r)
  r = Abs(x)
}
)");
  ASSERT_TRUE(g) << errorOf(g);
  std::vector<std::string> order;
  for (ir::Node *n : (*g)->nodes())
    order.push_back(n->opType());
  EXPECT_EQ(order, (std::vector<std::string>{"Abs", "Relu", "Neg"}));
}

TEST(Importer, CycleIsAnErrorNamingANode) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] z) {
  a = Add(x, b)
  b = Relu(a)
  z = Neg(b)
}
)");
  std::string e = errorOf(g);
  EXPECT_NE(e.find("cycle"), std::string::npos) << e;
  EXPECT_EQ(e.rfind("node '", 0), 0u) << e;
}

TEST(Importer, DanglingInputIsAnError) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { y = Add(x, nowhere) }
)");
  EXPECT_EQ(errorOf(g), "node 'Add_0' (Add): input 'nowhere' is not defined by any graph input, "
                        "initializer or node output (dangling input)");
}

TEST(Importer, UndefinedGraphOutputIsAnError) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y, float[2] ghost) { y = Relu(x) }
)");
  EXPECT_EQ(errorOf(g), "output 'ghost': is not produced by any node, graph input or initializer");
}

TEST(Importer, DuplicateDefinitionsAreErrors) {
  auto twoProducers = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { y = Relu(x)  y = Neg(x) }
)");
  EXPECT_EQ(errorOf(twoProducers),
            "node 'Neg_1' (Neg): output 'y' is already defined by node 'Relu_0' (Relu)");
  auto initializerOutput = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] w) <float[2] w = {1.0, 2.0}> { w = Relu(x) }
)");
  EXPECT_EQ(errorOf(initializerOutput),
            "node 'Relu_0' (Relu): output 'w' is already defined by an initializer");
  auto inputOutput = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] x) { x = Relu(x) }
)");
  EXPECT_EQ(errorOf(inputOutput),
            "node 'Relu_0' (Relu): output 'x' is already defined by a graph input");
}

TEST(Importer, OmittedOptionalInputsAreNull) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { y = Clip(x, , ) }
)");
  ASSERT_TRUE(g) << errorOf(g);
  ir::Node *clip = (*g)->nodes()[0];
  EXPECT_EQ(clip->input(0), (*g)->findValue("x"));
  EXPECT_EQ(clip->input(1), nullptr);
  EXPECT_EQ(clip->input(2), nullptr);
}

// --- opsets, domains and operators --------------------------------------------------------------

TEST(Importer, OpsetOutOfRangeIsAnError) {
  for (int v : {6, 24}) {
    auto g = importText("<ir_version: 8, opset_import: [\"\" : " + std::to_string(v) +
                        "]>\ng (float[2] x) => (float[2] y) { y = Relu(x) }");
    EXPECT_EQ(errorOf(g), "model.onnx: opset_import: ai.onnx version " + std::to_string(v) +
                              " is not supported; dtc supports ai.onnx opsets 7 to 23");
  }
  for (int v : {7, 21, 22, 23}) {
    auto g = importText("<ir_version: 8, opset_import: [\"\" : " + std::to_string(v) +
                        "]>\ng (float[2] x) => (float[2] y) { y = Relu(x) }");
    EXPECT_TRUE(g) << errorOf(g);
  }
}

TEST(Importer, MissingOpsetAndIrVersionAreErrors) {
  EXPECT_EQ(errorOf(importText("g (float[2] x) => (float[2] y) { y = Relu(x) }")),
            "model.onnx: ir_version is missing (is this an ONNX model?)");
  EXPECT_EQ(errorOf(importText("<ir_version: 8>\ng (float[2] x) => (float[2] y) { y = Relu(x) }")),
            "model.onnx: opset_import has no entry for ai.onnx (the default domain); dtc "
            "supports ai.onnx opsets 7 to 23");
}

TEST(Importer, UnknownDomainsAreErrors) {
  auto declared = importText(R"(
<ir_version: 8, opset_import: ["" : 13, "com.microsoft" : 1]>
g (float[2] x) => (float[2] y) { y = Relu(x) }
)");
  EXPECT_EQ(errorOf(declared), "model.onnx: opset_import: unknown domain 'com.microsoft' "
                               "(version 1); dtc supports the domains ai.onnx and ai.dtc");
  auto onNode = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { y = com.example.Gelu(x) }
)");
  EXPECT_EQ(errorOf(onNode), "node 'Gelu_0' (Gelu): domain 'com.example' of op type 'Gelu' is "
                             "unknown (not in opset_import); dtc supports the domains ai.onnx "
                             "and ai.dtc");
}

TEST(Importer, UnsupportedOpListsSupportedOps) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { y = Frobnicate(x) }
)");
  EXPECT_EQ(errorOf(g), "node 'Frobnicate_0' (Frobnicate): unsupported operator 'Frobnicate' in "
                        "domain 'ai.onnx'; supported operators: " +
                            ops::supportedOpsText());
}

TEST(Importer, OpNotYetInDeclaredOpsetIsAnError) {
  const ops::OpDef *def = ops::lookupOp("", "LayerNormalization");
  ASSERT_NE(def, nullptr);
  int since = def->versions.front().since;
  ASSERT_GT(since, 7);
  std::string opset = std::to_string(since - 1);
  auto g = importText("<ir_version: 8, opset_import: [\"\" : " + opset + R"(]>
g (float[2, 3] x, float[3] s) => (float[2, 3] y) { y = LayerNormalization(x, s) }
)");
  EXPECT_EQ(errorOf(g), "node 'LayerNormalization_0' (LayerNormalization): LayerNormalization "
                        "does not exist in opset " +
                            opset + " (since " + std::to_string(since) + ")");
}

TEST(Importer, FormIsCheckedAgainstTheOpset) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { y = Relu(x, x) }
)");
  std::string e = errorOf(g);
  EXPECT_EQ(e.rfind("node 'Relu_0' (Relu): expects at most 1 inputs in opset 13", 0), 0u) << e;
}

TEST(Importer, NodesAreNormalizedToTheCanonicalForm) {
  auto g = importText(R"(
<ir_version: 7, opset_import: ["" : 11]>
g (float[1, 3] x) => (y) { y = Squeeze<axes = [0]>(x) }
)");
  ASSERT_TRUE(g) << errorOf(g);
  ASSERT_EQ((*g)->numNodes(), 1u);
  ir::Node *sq = (*g)->nodes()[0];
  EXPECT_FALSE(sq->hasAttr("axes"));
  ASSERT_EQ(sq->numInputs(), 2u);
  ASSERT_NE(sq->input(1), nullptr);
  ASSERT_TRUE(sq->input(1)->isConstant());
  EXPECT_EQ(*sq->input(1)->initializer()->toInt64s(), (std::vector<int64_t>{0}));
}

TEST(Importer, GraphAttributeIsRejected) {
  onnx::ModelProto m = parseText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (bool c, float[2] x) => (float[2] y) { y = Relu(x) }
)");
  onnx::NodeProto *n = m.mutable_graph()->mutable_node(0);
  n->set_op_type("If");
  n->set_name("branch");
  n->clear_input();
  n->add_input("c");
  onnx::AttributeProto *a = n->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name("then");
  EXPECT_EQ(errorOf(importProto(m)),
            "node 'branch' (If): graph-valued attribute 'then_branch' (a control-flow body) is "
            "not supported; dtc needs graphs without If/Loop/Scan");
}

TEST(Importer, AttributesAreConverted) {
  onnx::ModelProto m = parseText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2, 3] x) => (float[3, 2] y) { y = Transpose<perm = [1, 0]>(x) }
)");
  onnx::NodeProto *n = m.mutable_graph()->mutable_node(0);
  auto add = [&](const char *name, onnx::AttributeProto::AttributeType t) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(t);
    return a;
  };
  add("i", onnx::AttributeProto::INT)->set_i(3);
  add("f", onnx::AttributeProto::FLOAT)->set_f(0.5f);
  add("s", onnx::AttributeProto::STRING)->set_s("abc");
  add("fs", onnx::AttributeProto::FLOATS)->add_floats(1.5f);
  add("ss", onnx::AttributeProto::STRINGS)->add_strings("q");
  onnx::TensorProto *t = add("t", onnx::AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(2);
  t->add_int64_data(4);
  t->add_int64_data(5);
  // Transpose does not accept these attributes, so import stops at the form check; the
  // attributes are converted before it. Check through the message and a form-free op below.
  std::string e = errorOf(importProto(m));
  EXPECT_NE(e.find("attribute 'f' is not allowed for Transpose in opset 13"), std::string::npos)
      << e;

  // A ref_attr_name outside a function is an error naming the node.
  onnx::ModelProto m2 = parseText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2, 3] x) => (float[3, 2] y) { y = Transpose<perm = [1, 0]>(x) }
)");
  m2.mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_ref_attr_name("p");
  EXPECT_EQ(errorOf(importProto(m2)),
            "node 'Transpose_0' (Transpose): attribute 'perm': refers to function attribute "
            "'p', which is only valid inside a function body");
}

TEST(Importer, AttributeKindsKeepTheirValues) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2, 3] x) => (float[3, 2] y) { y = Transpose<perm = [1, 0]>(x) }
)");
  ASSERT_TRUE(g) << errorOf(g);
  const ir::Attribute *perm = (*g)->nodes()[0]->attr("perm");
  ASSERT_NE(perm, nullptr);
  EXPECT_EQ(perm->kind(), ir::AttrKind::kInts);
  EXPECT_EQ(perm->ints(), (std::vector<int64_t>{1, 0}));
  auto g2 = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2, 3] x) => (float[2, 3] y) { y = LeakyRelu<alpha = 0.25>(x) }
)");
  ASSERT_TRUE(g2) << errorOf(g2);
  const ir::Attribute *alpha = (*g2)->nodes()[0]->attr("alpha");
  ASSERT_NE(alpha, nullptr);
  EXPECT_EQ(alpha->kind(), ir::AttrKind::kFloat);
  EXPECT_FLOAT_EQ(alpha->f(), 0.25f);
}

TEST(Importer, FunctionsAreRejectedWhenUsed) {
  onnx::ModelProto m = parseText(R"(
<ir_version: 8, opset_import: ["" : 13, "local" : 1]>
g (float[2] x) => (float[2] y) { y = local.MyRelu(x) }
)");
  onnx::FunctionProto *f = m.add_functions();
  f->set_name("MyRelu");
  f->set_domain("local");
  EXPECT_EQ(errorOf(importProto(m)),
            "node 'MyRelu_0' (MyRelu): calls the model-local function 'local.MyRelu'; functions "
            "are not supported (inline them before import)");
  m.mutable_graph()->mutable_node(0)->set_op_type("Relu");
  m.mutable_graph()->mutable_node(0)->set_domain("");
  auto g = importProto(m);
  EXPECT_TRUE(g) << errorOf(g);
}

// --- declared types --------------------------------------------------------------------------

TEST(Importer, NonTensorInputIsAnError) {
  onnx::ModelProto m = parseText(kAddModel);
  onnx::TypeProto *t = m.mutable_graph()->mutable_input(0)->mutable_type();
  t->Clear();
  t->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  EXPECT_EQ(errorOf(importProto(m)), "input 'x': sequence types are not supported (only tensors)");
}

TEST(Importer, NegativeAndOverflowingDimsAreErrors) {
  onnx::ModelProto m = parseText(kAddModel);
  m.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_value(-3);
  EXPECT_EQ(errorOf(importProto(m)), "input 'x': negative dimension -3 in its declared shape");
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1099511627776, 1099511627776] x) => (float[1099511627776, 1099511627776] y) {
  y = Relu(x)
}
)");
  EXPECT_EQ(errorOf(g), "input 'x': declared shape [1099511627776,1099511627776] has more "
                        "elements than fit in int64");
}

TEST(Importer, ValueInfoTypesAreAttached) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 3] x) => (float[N, 3] y) <float[N, 3] h> { h = Relu(x)  y = Neg(h) }
)");
  ASSERT_TRUE(g) << errorOf(g);
  EXPECT_EQ((*g)->findValue("h")->type().str(), "f32[N,3]");
}

// --- initializers: storage forms ------------------------------------------------------------

onnx::ModelProto modelWithInitializer(const onnx::TensorProto &t) {
  onnx::ModelProto m = parseText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { y = Relu(x) }
)");
  *m.mutable_graph()->add_initializer() = t;
  return m;
}

onnx::TensorProto tensor(const std::string &name, int dtype, std::vector<int64_t> dims) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(dtype);
  for (int64_t d : dims)
    t.add_dims(d);
  return t;
}

std::string bytesOf(const ir::Graph &g, const std::string &name) {
  const ir::Value *v = g.findValue(name);
  if (!v || !v->initializer())
    return "<none>";
  auto b = v->initializer()->bytes();
  return b ? **b : "<error>";
}

TEST(Importer, EveryStorageFormIsPacked) {
  {
    onnx::TensorProto t = tensor("f", onnx::TensorProto::FLOAT, {2});
    t.add_float_data(1.5f);
    t.add_float_data(-2.0f);
    onnx::ModelProto m = modelWithInitializer(t);
    auto g = importProto(m);
    ASSERT_TRUE(g) << errorOf(g);
    EXPECT_EQ(*(*g)->findValue("f")->initializer()->toDoubles(), (std::vector<double>{1.5, -2.0}));
  }
  struct IntCase {
    int dtype;
    std::vector<int32_t> values;
    std::string bytes;
  } cases[] = {
      {onnx::TensorProto::INT32, {-1, 2}, std::string("\xff\xff\xff\xff\x02\0\0\0", 8)},
      {onnx::TensorProto::INT16, {-2, 3}, std::string("\xfe\xff\x03\0", 4)},
      {onnx::TensorProto::INT8, {-3, 4}, std::string("\xfd\x04", 2)},
      {onnx::TensorProto::UINT8, {200, 4}, std::string("\xc8\x04", 2)},
      {onnx::TensorProto::UINT16, {65535, 1}, std::string("\xff\xff\x01\0", 4)},
      {onnx::TensorProto::BOOL, {1, 0}, std::string("\x01\0", 2)},
      {onnx::TensorProto::FLOAT16, {0x3c00, 0xc000}, std::string("\x00\x3c\x00\xc0", 4)},
      {onnx::TensorProto::BFLOAT16, {0x3f80, 0x4000}, std::string("\x80\x3f\x00\x40", 4)},
  };
  for (const IntCase &c : cases) {
    onnx::TensorProto t = tensor("t", c.dtype, {2});
    for (int32_t v : c.values)
      t.add_int32_data(v);
    onnx::ModelProto m = modelWithInitializer(t);
    auto g = importProto(m);
    ASSERT_TRUE(g) << errorOf(g);
    EXPECT_EQ(bytesOf(**g, "t"), c.bytes) << "dtype " << c.dtype;
    EXPECT_EQ(static_cast<int>((*g)->findValue("t")->dtype()), c.dtype);
  }
  {
    onnx::TensorProto t = tensor("i", onnx::TensorProto::INT64, {3});
    for (int64_t v : {int64_t{-1}, int64_t{1} << 40, int64_t{5}})
      t.add_int64_data(v);
    onnx::ModelProto m = modelWithInitializer(t);
    auto g = importProto(m);
    ASSERT_TRUE(g) << errorOf(g);
    EXPECT_EQ(*(*g)->findValue("i")->initializer()->toInt64s(),
              (std::vector<int64_t>{-1, int64_t{1} << 40, 5}));
  }
  {
    onnx::TensorProto t = tensor("d", onnx::TensorProto::DOUBLE, {2});
    t.add_double_data(0.25);
    t.add_double_data(1e300);
    onnx::ModelProto m = modelWithInitializer(t);
    auto g = importProto(m);
    ASSERT_TRUE(g) << errorOf(g);
    EXPECT_EQ(*(*g)->findValue("d")->initializer()->toDoubles(),
              (std::vector<double>{0.25, 1e300}));
  }
  {
    onnx::TensorProto u32 = tensor("u32", onnx::TensorProto::UINT32, {1});
    u32.add_uint64_data(4000000000u);
    onnx::TensorProto u64 = tensor("u64", onnx::TensorProto::UINT64, {1});
    u64.add_uint64_data(7);
    onnx::ModelProto m = modelWithInitializer(u32);
    *m.mutable_graph()->add_initializer() = u64;
    auto g = importProto(m);
    ASSERT_TRUE(g) << errorOf(g);
    EXPECT_EQ(*(*g)->findValue("u32")->initializer()->toInt64s(),
              (std::vector<int64_t>{4000000000}));
    EXPECT_EQ(*(*g)->findValue("u64")->initializer()->toInt64s(), (std::vector<int64_t>{7}));
  }
}

TEST(Importer, RawDataIsMovedNotCopied) {
  onnx::TensorProto t = tensor("w", onnx::TensorProto::FLOAT, {2});
  float values[2] = {3.0f, 4.0f};
  t.set_raw_data(std::string(reinterpret_cast<const char *>(values), sizeof(values)));
  onnx::ModelProto m = modelWithInitializer(t);
  auto g = importProto(m);
  ASSERT_TRUE(g) << errorOf(g);
  EXPECT_EQ(*(*g)->findValue("w")->initializer()->toDoubles(), (std::vector<double>{3.0, 4.0}));
  EXPECT_TRUE(m.graph().initializer(0).raw_data().empty()); // moved out of the proto
}

TEST(Importer, BadInitializersAreErrorsNamingTheTensor) {
  {
    onnx::TensorProto t = tensor("w", onnx::TensorProto::FLOAT, {2, 3});
    t.set_raw_data(std::string(20, '\0'));
    onnx::ModelProto m = modelWithInitializer(t);
    EXPECT_EQ(errorOf(importProto(m)), "tensor 'w': raw_data has 20 bytes, but f32[2,3] needs 24");
  }
  {
    onnx::TensorProto t = tensor("w", onnx::TensorProto::FLOAT, {3});
    t.add_float_data(1.0f);
    onnx::ModelProto m = modelWithInitializer(t);
    EXPECT_EQ(errorOf(importProto(m)), "tensor 'w': float_data has 1 values, but f32[3] needs 3");
  }
  {
    onnx::TensorProto t = tensor("w", onnx::TensorProto::INT64, {1});
    t.add_float_data(1.0f);
    onnx::ModelProto m = modelWithInitializer(t);
    EXPECT_EQ(errorOf(importProto(m)),
              "tensor 'w': i64 values must be in int64_data or raw_data, but float_data is used");
  }
  {
    onnx::TensorProto t = tensor("s", onnx::TensorProto::STRING, {1});
    t.add_string_data("x");
    onnx::ModelProto m = modelWithInitializer(t);
    EXPECT_EQ(errorOf(importProto(m)), "tensor 's': element type STRING is not supported");
  }
  {
    onnx::TensorProto t = tensor("c", onnx::TensorProto::COMPLEX64, {1});
    onnx::ModelProto m = modelWithInitializer(t);
    EXPECT_EQ(errorOf(importProto(m)), "tensor 'c': element type COMPLEX64 is not supported");
  }
  {
    onnx::TensorProto t =
        tensor("big", onnx::TensorProto::FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
    onnx::ModelProto m = modelWithInitializer(t);
    EXPECT_EQ(errorOf(importProto(m)), "tensor 'big': dims [1099511627776,1099511627776] have "
                                       "more elements than fit in int64");
  }
  {
    onnx::TensorProto t = tensor("w", onnx::TensorProto::FLOAT, {2});
    onnx::ModelProto m = modelWithInitializer(t);
    EXPECT_EQ(errorOf(importProto(m)), "tensor 'w': has no data (f32[2] needs 8 bytes)");
  }
  {
    onnx::TensorProto t = tensor("w", onnx::TensorProto::FLOAT, {0});
    onnx::ModelProto m = modelWithInitializer(t);
    *m.mutable_graph()->add_initializer() = t;
    EXPECT_EQ(errorOf(importProto(m)), "tensor 'w': two initializers have this name");
  }
}

// --- external data -------------------------------------------------------------------------

onnx::TensorProto externalTensor(const std::string &location, const std::string &offset = "",
                                 const std::string &length = "") {
  onnx::TensorProto t = tensor("w", onnx::TensorProto::FLOAT, {2});
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto entry = [&](const std::string &k, const std::string &v) {
    onnx::StringStringEntryProto *e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  entry("location", location);
  if (!offset.empty())
    entry("offset", offset);
  if (!length.empty())
    entry("length", length);
  return t;
}

TEST(Importer, ExternalDataIsLazy) {
  TempDir dir;
  float values[2] = {6.0f, 7.0f};
  std::string data = "PADDING!" + std::string(reinterpret_cast<const char *>(values), 8);
  dir.file("weights/w.bin", data);
  onnx::ModelProto m = modelWithInitializer(externalTensor("weights/w.bin", "8", "8"));
  std::string path = dir.file("model.onnx", m.SerializeAsString());
  Diagnostics diags;
  auto g = importModelFile(path, diags);
  ASSERT_TRUE(g) << errorOf(g);
  EXPECT_EQ((*g)->modelInfo().directory, dir.path().string());
  const ir::TensorDataPtr &w = (*g)->findValue("w")->initializer();
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->isExternal());
  EXPECT_FALSE(w->isLoaded()); // not read at import
  EXPECT_EQ(w->externalOffset(), 8);
  EXPECT_EQ(*w->toDoubles(), (std::vector<double>{6.0, 7.0}));
  EXPECT_TRUE(w->isLoaded());
}

TEST(Importer, ExternalDataEscapesAndBadRangesAreErrors) {
  TempDir dir;
  fs::create_directories(dir.path() / "m");
  dir.file("outside.bin", std::string(8, '\0'));
  dir.file("m/w.bin", std::string(8, '\0'));
  std::string mdir = (dir.path() / "m").string();
  auto check = [&](const onnx::TensorProto &t, const std::string &expectedStart) {
    onnx::ModelProto m = modelWithInitializer(t);
    std::string e = errorOf(importProto(m, mdir));
    EXPECT_EQ(e.rfind(expectedStart, 0), 0u) << e;
  };
  check(externalTensor("../outside.bin"),
        "tensor 'w': external data location '../outside.bin' resolves to '" +
            (dir.path() / "outside.bin").string() + "', outside the model's folder");
  check(externalTensor((dir.path() / "m/w.bin").string()), "tensor 'w': external data location '" +
                                                               (dir.path() / "m/w.bin").string() +
                                                               "' is an absolute path");
  check(externalTensor("missing.bin"),
        "tensor 'w': external data file 'missing.bin' does not exist");
  check(externalTensor("w.bin", "4"),
        "tensor 'w': external data offset 4 + length 8 is past the end of 'w.bin' (8 bytes)");
  check(externalTensor("w.bin", "", "12"),
        "tensor 'w': external data length 12 does not match the 8 bytes");
  check(externalTensor("w.bin", "-1"),
        "tensor 'w': external data offset '-1' is not a non-negative integer");
  fs::create_symlink(dir.path() / "outside.bin", dir.path() / "m/link.bin");
  check(externalTensor("link.bin"), "tensor 'w': external data location 'link.bin' resolves to '" +
                                        (dir.path() / "outside.bin").string() + "', outside");
  // '..' that stays inside the folder is fine.
  fs::create_directories(dir.path() / "m/sub");
  onnx::ModelProto m = modelWithInitializer(externalTensor("sub/../w.bin"));
  auto g = importProto(m, mdir);
  EXPECT_TRUE(g) << errorOf(g);
}

// --- files ------------------------------------------------------------------------------------

TEST(Importer, BinaryAndTextFilesImport) {
  TempDir dir;
  onnx::ModelProto m = parseText(kAddModel);
  Diagnostics diags;
  auto bin = importModelFile(dir.file("a.onnx", m.SerializeAsString()), diags);
  ASSERT_TRUE(bin) << errorOf(bin);
  EXPECT_EQ((*bin)->numNodes(), 1u);
  auto txt = importModelFile(dir.file("a.onnxtxt", kAddModel), diags);
  ASSERT_TRUE(txt) << errorOf(txt);
  EXPECT_EQ((*txt)->findValue("w")->type().str(), "f32[3]");
  // Text content is recognized whatever the extension.
  auto sniffed = importModelFile(dir.file("b.onnx", kAddModel), diags);
  EXPECT_TRUE(sniffed) << errorOf(sniffed);
}

TEST(Importer, BadFilesGetSpecificErrors) {
  TempDir dir;
  Diagnostics diags;
  auto err = [&](const std::string &path) { return errorOf(importModelFile(path, diags)); };
  std::string p = (dir.path() / "nope.onnx").string();
  EXPECT_EQ(err(p), p + ": no such file");
  EXPECT_EQ(err(dir.path().string()), dir.path().string() + ": is a directory, not an ONNX "
                                                            "model file");
  p = dir.file("empty.onnx", "");
  EXPECT_EQ(err(p), p + ": is empty (0 bytes); expected an ONNX model (.onnx binary or .onnxtxt "
                        "text)");
  p = dir.file("lfs.onnx", "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 9\n");
  EXPECT_EQ(err(p), p + ": is a Git LFS pointer file, not the model itself; fetch the model with "
                        "`git lfs pull`");
  p = dir.file("proto.onnx", "ir_version: 8\ngraph {\n  name: \"g\"\n}\n");
  EXPECT_EQ(err(p).rfind(p + ": looks like protobuf text format (prototxt, starts with "
                             "'ir_version')",
                         0),
            0u);
  onnx::ModelProto m = parseText(kAddModel);
  std::string bytes = m.SerializeAsString();
  p = dir.file("trunc.onnx", bytes.substr(0, bytes.size() - 10));
  EXPECT_EQ(err(p).rfind(p + ": is truncated: field 'graph'", 0), 0u) << err(p);
  p = dir.file("random.onnx", std::string("\xff\xfe\x07\x01\x02\x03\x04\x05", 8));
  EXPECT_EQ(err(p).rfind(p + ": is not an ONNX model: protobuf parsing failed at byte 0", 0), 0u)
      << err(p);
  p = dir.file("bad.onnxtxt", "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float x) => ( {");
  EXPECT_EQ(err(p).rfind(p + ": ONNX text syntax error at line 2", 0), 0u) << err(p);
  p = dir.file("prose.onnx", "hello world, this is not a model\n");
  EXPECT_EQ(err(p).rfind(p + ": is a text file but neither ONNX text syntax", 0), 0u) << err(p);
}

} // namespace
} // namespace dtc::onnxio
