// Tests of --untie-initializers (compiler/onnx/UntieInitializers.h): which initializers get
// copies (constant-filled floats read more than once, through Identity too), which do not
// (varied values, integers, graph inputs and outputs, a single use), the copies' names and
// data, and that running it twice on the same model gives the same graph.
#include "compiler/onnx/UntieInitializers.h"

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

namespace dtc::onnxio {
namespace {

onnx::ModelProto parseText(const std::string &text) {
  onnx::ModelProto m;
  onnx::OnnxParser parser(text.c_str());
  auto s = parser.Parse(m);
  EXPECT_TRUE(s.IsOK()) << s.ErrorMessage();
  return m;
}

const onnx::TensorProto *findInit(const onnx::GraphProto &g, const std::string &name) {
  for (const onnx::TensorProto &t : g.initializer())
    if (t.name() == name)
      return &t;
  return nullptr;
}

/// The test model, with the initializer 'occupied' renamed 'ones.untied.1' (ONNX's text syntax
/// has no dots in names): the name the first copy of 'ones' would take.
onnx::ModelProto testModel();

const char *kModel = R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2, 3] x, float[3] over) => (float[2, 3] y, float[3] twos)
<float[3] ones = {1, 1, 1}, float[3] w = {1, 2, 3}, int64[1] ax = {0}, float[3] over = {5, 5, 5},
 float[3] twos = {2, 2, 2}, float[3] once = {7, 7, 7}, float[3] occupied = {3, 3, 3}>
{
  a = Mul(x, ones)
  b = Add(a, ones)
  alias = Identity(ones)
  alias2 = Identity(alias)
  c = Mul(b, alias2)
  d = Mul(c, w)
  e = Add(d, w)
  f = Mul(e, over)
  g = Add(f, over)
  h = Mul(g, twos)
  i = Add(h, twos)
  j = Mul(i, once)
  s = ReduceSum<keepdims = 1>(j, ax)
  k = Add(j, s)
  y = Mul(k, occupied)
}
)";

onnx::ModelProto testModel() {
  onnx::ModelProto m = parseText(kModel);
  for (onnx::TensorProto &t : *m.mutable_graph()->mutable_initializer())
    if (t.name() == "occupied")
      t.set_name("ones.untied.1");
  for (onnx::NodeProto &n : *m.mutable_graph()->mutable_node())
    for (std::string &in : *n.mutable_input())
      if (in == "occupied")
        in = "ones.untied.1";
  return m;
}

TEST(UntieInitializers, CopiesEachUseOfConstantFilledFloatsOnly) {
  onnx::ModelProto m = testModel();
  auto untied = untieInitializers(*m.mutable_graph());
  ASSERT_TRUE(untied) << untied.status().message();
  // Only 'ones': 'w' holds varied values, 'over' is a graph input, 'twos' a graph output, 'once'
  // has one use, 'ax' is an integer; the Identity chain is bypassed (three uses in all).
  ASSERT_EQ(untied->size(), 1u);
  EXPECT_EQ((*untied)[0].name, "ones");
  // 'ones.untied.1' is taken by the model's own initializer: the copy takes a further suffix.
  EXPECT_EQ((*untied)[0].copies, (std::vector<std::string>{"ones.untied.1_1", "ones.untied.2"}));
  const onnx::GraphProto &g = m.graph();
  std::vector<std::string> onesReaders;
  for (const onnx::NodeProto &n : g.node()) {
    EXPECT_NE(n.op_type(), "Identity");
    for (const std::string &in : n.input())
      if (in.rfind("ones", 0) == 0)
        onesReaders.push_back(n.output(0) + ":" + in);
  }
  EXPECT_EQ(onesReaders, (std::vector<std::string>{"a:ones", "b:ones.untied.1_1", "c:ones.untied.2",
                                                   "y:ones.untied.1"}));
  const onnx::TensorProto *copy = findInit(g, "ones.untied.2");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->data_type(), onnx::TensorProto::FLOAT);
  ASSERT_EQ(copy->float_data_size(), 3);
  EXPECT_EQ(copy->float_data(2), 1.0f);
  EXPECT_EQ(findInit(g, "over.untied.1"), nullptr);
  EXPECT_EQ(findInit(g, "twos.untied.1"), nullptr);
}

TEST(UntieInitializers, RawDataAndDeterminism) {
  onnx::ModelProto m = testModel();
  // The same ones as raw little-endian bytes, and a raw tensor with one differing element.
  for (onnx::TensorProto &t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name() != "ones" && t.name() != "w")
      continue;
    std::vector<float> v(t.float_data().begin(), t.float_data().end());
    t.clear_float_data();
    t.set_raw_data(std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4));
  }
  onnx::ModelProto again = m;
  auto first = untieInitializers(*m.mutable_graph());
  auto second = untieInitializers(*again.mutable_graph());
  ASSERT_TRUE(first && second);
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].copies.size(), 2u);
  EXPECT_EQ(m.SerializeAsString(), again.SerializeAsString());
  const onnx::TensorProto *copy = findInit(m.graph(), "ones.untied.2");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->raw_data(), findInit(m.graph(), "ones")->raw_data());
}

TEST(UntieInitializers, NothingToDo) {
  onnx::ModelProto m = parseText(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[3] x) => (float[3] y)
<float[3] w = {1, 2, 3}>
{
  a = Mul(x, w)
  y = Add(a, w)
}
)");
  const std::string before = m.SerializeAsString();
  auto untied = untieInitializers(*m.mutable_graph());
  ASSERT_TRUE(untied);
  EXPECT_TRUE(untied->empty());
  EXPECT_EQ(m.SerializeAsString(), before);
}

} // namespace
} // namespace dtc::onnxio
