// Unit tests of the IR graph: use lists, replacement, node order, topological sort, verifier,
// printer, lazy external tensor data, training roles.
#include "compiler/ir/Graph.h"
#include "compiler/ir/Printer.h"
#include "compiler/ir/Verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace dtc::ir;

namespace {

TensorType f32(std::vector<Dim> dims) { return TensorType{DType::kFloat32, Shape(std::move(dims))}; }

/// x -> Relu -> Neg -> y
std::unique_ptr<Graph> chain() {
  auto g = std::make_unique<Graph>();
  g->setOpset("", 13);
  Value *x = g->createValue("x", f32({Dim::symbol("N"), Dim::fixed(4)}));
  g->addInput(x);
  Node *relu = g->addNode("Relu", {x}, {"r"}, "", "relu");
  Node *neg = g->addNode("Neg", {relu->output(0)}, {"y"}, "", "neg");
  g->addOutput(neg->output(0));
  return g;
}

} // namespace

TEST(Graph, UseListsFollowInputs) {
  auto g = chain();
  Value *x = g->findValue("x");
  Value *r = g->findValue("r");
  ASSERT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(x->uses()[0].node->name(), "relu");
  EXPECT_EQ(r->producer()->name(), "relu");
  Node *neg = g->findNode("neg");
  neg->setInput(0, x);
  EXPECT_EQ(x->uses().size(), 2u);
  EXPECT_TRUE(r->uses().empty());
  EXPECT_TRUE(verifyGraph(*g).isOk());
}

TEST(Graph, ReplaceAllUsesUpdatesGraphOutputs) {
  auto g = chain();
  Value *x = g->findValue("x");
  Value *y = g->findValue("y");
  y->replaceAllUsesWith(x);
  EXPECT_EQ(g->outputs()[0], x);
  EXPECT_FALSE(y->isGraphOutput());
  EXPECT_TRUE(x->isGraphOutput());
}

TEST(Graph, EraseNodeRemovesOutputs) {
  auto g = chain();
  Node *neg = g->findNode("neg");
  g->findValue("y")->replaceAllUsesWith(g->findValue("r"));
  g->eraseNode(neg);
  EXPECT_EQ(g->findValue("y"), nullptr);
  EXPECT_EQ(g->numNodes(), 1u);
  EXPECT_TRUE(verifyGraph(*g).isOk());
}

TEST(Graph, UniqueNames) {
  auto g = chain();
  EXPECT_EQ(g->uniqueName("z"), "z");
  EXPECT_EQ(g->uniqueName("x"), "x_1");
  EXPECT_EQ(g->uniqueNodeName("relu"), "relu_1");
}

TEST(Graph, TopologicalSortFixesOrderAndKeepsSortedOnes) {
  Graph g;
  Value *x = g.createValue("x", f32({Dim::fixed(2)}));
  g.addInput(x);
  // Build b (consumer) before a (producer) by rewiring afterwards.
  Node *b = g.addNode("Neg", {x}, {"b_out"}, "", "b");
  Node *a = g.addNode("Relu", {x}, {"a_out"}, "", "a");
  b->setInput(0, a->output(0));
  g.addOutput(b->output(0));
  EXPECT_FALSE(verifyGraph(g).isOk());
  ASSERT_TRUE(g.topologicalSort().isOk());
  ASSERT_EQ(g.nodes()[0]->name(), "a");
  EXPECT_TRUE(verifyGraph(g).isOk());
  ASSERT_TRUE(g.topologicalSort().isOk());
  EXPECT_EQ(g.nodes()[0]->name(), "a");
}

TEST(Graph, TopologicalSortReportsCycle) {
  Graph g;
  Value *x = g.createValue("x", f32({Dim::fixed(2)}));
  g.addInput(x);
  Node *a = g.addNode("Add", {x, x}, {"a_out"}, "", "a");
  Node *b = g.addNode("Neg", {a->output(0)}, {"b_out"}, "", "b");
  a->setInput(1, b->output(0));
  g.addOutput(b->output(0));
  dtc::Status s = g.topologicalSort();
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("cycle"), std::string::npos);
  EXPECT_NE(s.message().find("node '"), std::string::npos);
}

TEST(Verifier, DanglingInputIsNamed) {
  Graph g;
  Value *ghost = g.createValue("ghost", f32({Dim::fixed(2)}));
  Node *n = g.addNode("Relu", {ghost}, {"y"}, "", "r");
  g.addOutput(n->output(0));
  dtc::Status s = verifyGraph(g);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "node 'r' (Relu): input 'ghost' is not a graph input, an initializer or "
                         "the output of any node");
}

TEST(Printer, DeterministicText) {
  auto g = chain();
  Value *w = g->createValue("w");
  g->setInitializer(w, TensorData::fromFloats("w", {2}, {1.5f, -2.0f}));
  Value *shape = g->addConstant("shape", TensorData::fromInt64s("shape", {2}, {0, -1}));
  Node *add = g->addNode("Add", {g->findValue("y"), w}, {"z"}, "", "add");
  add->setAttr("b", Attribute(std::vector<int64_t>{1, 2}));
  add->setAttr("a", Attribute(0.5f));
  add->setPhase(Phase::kBackward);
  (void)shape;
  std::string text = printGraph(*g);
  EXPECT_EQ(text, "graph main opset(ai.onnx=13)\n"
                  "  input %x : f32[N,4]\n"
                  "  param %w : f32[2] = [1.5,-2]\n"
                  "  const %shape : i64[2] = [0,-1]\n"
                  "  %r : undef[*] = Relu \"relu\" (%x)\n"
                  "  %y : undef[*] = Neg \"neg\" (%r)\n"
                  "  %z : undef[*] = Add \"add\" (%y, %w) {a=0.5, b=[1,2]} [phase=backward]\n"
                  "  output %y\n");
  EXPECT_EQ(printGraph(*g), text);
}

TEST(Printer, QuotesUnusualNames) {
  Graph g;
  Value *x = g.createValue("input 0", f32({Dim::fixed(1)}));
  g.addInput(x);
  EXPECT_NE(printGraph(g).find("%\"input 0\""), std::string::npos);
}

TEST(Graph, FoldToConstantsKeepsNamesAndUses) {
  auto g = chain();
  Node *relu = g->findNode("relu");
  g->foldToConstants(relu, {TensorData::fromFloats("r", {2}, {1, 2})});
  Value *r = g->findValue("r");
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->isConstant());
  EXPECT_FALSE(r->isParameter());
  EXPECT_EQ(r->producer(), nullptr);
  EXPECT_EQ(r->uses().size(), 1u);
  EXPECT_TRUE(verifyGraph(*g).isOk());
}

TEST(TensorData, ExternalDataIsReadLazilyAndChecked) {
  std::string path = (std::filesystem::temp_directory_path() / "dtc_graph_test.bin").string();
  {
    std::ofstream out(path, std::ios::binary);
    float values[3] = {1.0f, 2.0f, 3.0f};
    out.write("xxxx", 4);
    out.write(reinterpret_cast<const char *>(values), sizeof values);
  }
  auto t = TensorData::fromExternal("w", DType::kFloat32, {3}, path, 4, 12);
  EXPECT_FALSE(t->isLoaded());
  auto values = t->toDoubles();
  ASSERT_TRUE(values.hasValue()) << values.status().message();
  EXPECT_EQ(*values, (std::vector<double>{1, 2, 3}));
  EXPECT_TRUE(t->isLoaded());

  auto pastEnd = TensorData::fromExternal("v", DType::kFloat32, {3}, path, 8, 12);
  auto bytes = pastEnd->bytes();
  ASSERT_FALSE(bytes.hasValue());
  EXPECT_NE(bytes.status().message().find("tensor 'v'"), std::string::npos);
  EXPECT_NE(bytes.status().message().find("past the end"), std::string::npos);
  auto missing = TensorData::fromExternal("m", DType::kFloat32, {3}, path + ".nope", 0, 12);
  EXPECT_FALSE(missing->bytes().hasValue());
  std::remove(path.c_str());
}

TEST(Printer, EscapesNodeNamesAndSanitizesSymbols) {
  Graph g;
  Value *x = g.createValue("x", f32({Dim::symbol("batch size\n%"), Dim::fixed(2)}));
  g.addInput(x);
  Node *n = g.addNode("Relu", {x}, {"y"}, "", "a\"b\nc");
  g.addOutput(n->output(0));
  std::string text = printGraph(g);
  EXPECT_NE(text.find("input %x : f32[batch_size__,2]"), std::string::npos) << text;
  EXPECT_NE(text.find("Relu \"a\\\"b\\nc\" (%x)"), std::string::npos) << text;
  // One line per entry: the hostile names add no line breaks.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
}

namespace {

/// chain() as a training step: w is a parameter the loss y = Neg(Relu(x)) * w reads, g its
/// gradient (a stand-in node), and w takes the value of w_next at the end of the step.
std::unique_ptr<Graph> trainingChain() {
  auto g = chain();
  Value *w = g->createValue("w");
  g->setInitializer(w, TensorData::fromFloats("w", {2}, {1.0f, 2.0f}));
  Node *grad = g->addNode("Neg", {w}, {"w_grad"}, "", "grad");
  Node *next = g->addNode("Sub", {w, grad->output(0)}, {"w_next"}, "", "update");
  grad->output(0)->setType(w->type());
  next->output(0)->setType(w->type());
  TrainingRoles &t = g->training();
  t.loss = g->findValue("y");
  t.parameters = {w};
  t.gradients = {grad->output(0)};
  t.updates = {{w, next->output(0)}};
  t.optimizerBegin = next;
  return g;
}

} // namespace

TEST(TrainingRoles, PrintedVerifiedAndFollowReplacement) {
  auto g = trainingChain();
  ASSERT_TRUE(verifyGraph(*g).isOk()) << verifyGraph(*g).message();
  const std::string text = printGraph(*g);
  EXPECT_NE(text.find("  training {\n    loss %y\n    parameter %w gradient %w_grad\n"
                      "    update %w <- %w_next\n    optimizer-begin \"update\"\n  }\n"),
            std::string::npos)
      << text;
  // A role is a use: replacement moves it, and dead-value removal keeps its holder.
  Node *twice = g->addNode("Add", {g->findValue("w_grad"), g->findValue("w_grad")}, {"w_grad2"});
  g->findValue("w_grad")->replaceAllUsesWith(twice->output(0));
  EXPECT_EQ(g->training().gradients[0], twice->output(0));
  EXPECT_TRUE(g->isLiveRoot(twice->output(0)));
  EXPECT_FALSE(g->isLiveRoot(g->findValue("r")));
  Value *stray = g->createValue("stray", f32({Dim::fixed(2)}));
  g->training().label = stray;
  g->removeDeadValues();
  EXPECT_EQ(g->findValue("stray"), stray);
}

TEST(TrainingRoles, VerifierNamesBrokenRoles) {
  {
    auto g = trainingChain();
    g->training().label = g->createValue("ghost", f32({Dim::fixed(2)}));
    dtc::Status s = verifyGraph(*g);
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.message(), "training role value 'ghost': is not defined in the graph");
  }
  {
    auto g = trainingChain();
    g->training().parameters[0] = g->findValue("r");
    dtc::Status s = verifyGraph(*g);
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.message(), "trained parameter 'r': is not a parameter initializer");
  }
  {
    auto g = trainingChain();
    g->training().updates.push_back({g->findValue("r"), g->findValue("y")});
    dtc::Status s = verifyGraph(*g);
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.message(), "state 'r': is updated but not an initializer");
  }
  {
    auto g = trainingChain();
    g->training().gradients.push_back(nullptr);
    dtc::Status s = verifyGraph(*g);
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.message(), "training roles: 1 trained parameters but 2 gradients");
  }
}
