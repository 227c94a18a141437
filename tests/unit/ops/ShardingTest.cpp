// Tests of the sharding facet (ops/Sharding.h) and of shard slicing (compiler/ir/Sharding.h):
// every op a forward graph may hold has a rule (the facet completeness test), slicing and
// placing shards are inverse for plain and blocked splits, the reshape mapping of a split axis,
// and the family rules on concrete layouts.
#include "compiler/ir/Sharding.h"
#include "ops/OpDef.h"
#include "ops/Sharding.h"

#include <gtest/gtest.h>

#include <set>

namespace dtc {
namespace {

using ir::Sharding;

TEST(ShardingFacet, EveryForwardOpHasARule) {
  // Backward, optimizer and loss-gradient ops are created by autodiff and the optimizer pass,
  // after the tensor-parallel pass has run: they never meet a sharding rule.
  const std::set<std::string> afterTensorParallel = {"EltwiseGrad",
                                                     "ClipGrad",
                                                     "SoftmaxGrad",
                                                     "LogSoftmaxGrad",
                                                     "DropoutGrad",
                                                     "ConvGradData",
                                                     "ConvGradWeight",
                                                     "MaxPoolGrad",
                                                     "AveragePoolGrad",
                                                     "ResizeGrad",
                                                     "MatMulT",
                                                     "BatchNormGrad",
                                                     "LayerNormGrad",
                                                     "GroupNormGrad",
                                                     "SGD",
                                                     "Adam",
                                                     "AdamW",
                                                     "SumSquares",
                                                     "ClipGradNormScale",
                                                     "ZeroGradient",
                                                     "SoftmaxCrossEntropyLossGrad",
                                                     "NegativeLogLikelihoodLossGrad",
                                                     "SliceGrad",
                                                     "GatherGrad",
                                                     "GatherElementsGrad",
                                                     "GatherNDGrad"};
  int covered = 0;
  for (const ops::OpDef *d : ops::allOps()) {
    if (d->domain == ir::kDtcDomain && afterTensorParallel.count(d->name))
      continue;
    EXPECT_TRUE(static_cast<bool>(d->sharding)) << d->domain << "." << d->name;
    ++covered;
  }
  EXPECT_GT(covered, 90);
}

TEST(Sharding, Text) {
  EXPECT_EQ(Sharding::replicated().text(), "R");
  EXPECT_EQ(Sharding::split(1, 2).text(), "S1/2");
  EXPECT_EQ(Sharding::split(1, 2, 3).text(), "S1/2x3");
  EXPECT_EQ(Sharding::partial(4).text(), "P/4");
}

TEST(Sharding, ShardDimsChecksDivisibility) {
  auto d = ir::shardDims({6, 8}, Sharding::split(1, 2));
  ASSERT_TRUE(d.hasValue());
  EXPECT_EQ(*d, (std::vector<int64_t>{6, 4}));
  EXPECT_FALSE(ir::shardDims({6, 10}, Sharding::split(1, 4)).hasValue());
  EXPECT_FALSE(ir::shardDims({6, 12}, Sharding::split(2, 2)).hasValue());
  // 3 blocks of 4, each split in 2: 12 % 6 == 0.
  EXPECT_TRUE(ir::shardDims({2, 12}, Sharding::split(1, 2, 3)).hasValue());
  EXPECT_FALSE(ir::shardDims({2, 9}, Sharding::split(1, 2, 3)).hasValue());
}

std::string iota(int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s.push_back(static_cast<char>(i));
  return s;
}

TEST(Sharding, SliceThenPlaceIsIdentity) {
  const std::vector<int64_t> whole{3, 12};
  const std::string all = iota(36);
  for (const Sharding &s : {Sharding::split(0, 3), Sharding::split(1, 2), Sharding::split(1, 2, 3),
                            Sharding::split(1, 3, 2)}) {
    std::string back(all.size(), '\x7f');
    for (int64_t r = 0; r < s.parts; ++r)
      ir::placeShard(back, whole, 1, s, r, ir::sliceShard(all, whole, 1, s, r));
    EXPECT_EQ(back, all) << s.text();
  }
}

TEST(Sharding, UnevenSplitsAreArraySplits) {
  // 10 in 4 as numpy.array_split: 3, 3, 2, 2 starting at 0, 3, 6, 8.
  const int64_t first[] = {0, 3, 6, 8}, length[] = {3, 3, 2, 2};
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(ir::splitRange(10, 4, r).first, first[r]);
    EXPECT_EQ(ir::splitRange(10, 4, r).length, length[r]);
  }
  EXPECT_EQ(ir::splitRange(8, 4, 3).first, 6);
  EXPECT_TRUE(ir::isUnevenSplit({10, 64}, Sharding::split(0, 4)));
  EXPECT_FALSE(ir::isUnevenSplit({12, 64}, Sharding::split(0, 4)));
  EXPECT_FALSE(ir::isUnevenSplit({2, 9}, Sharding::split(1, 2, 3))); // blocked: never uneven
  auto d = ir::shardDimsOf({10, 64}, Sharding::split(0, 4), 2);
  ASSERT_TRUE(d.hasValue());
  EXPECT_EQ(*d, (std::vector<int64_t>{2, 64}));
  EXPECT_FALSE(ir::shardDims({10, 64}, Sharding::split(0, 4)).hasValue());
  auto few = ir::shardDimsOf({3, 4}, Sharding::split(0, 4), 0);
  ASSERT_FALSE(few.hasValue());
  EXPECT_NE(few.status().message().find("fewer elements than the divisor 4"), std::string::npos)
      << few.status().message();
  EXPECT_FALSE(ir::shardDimsOf({2, 9}, Sharding::split(1, 2, 3), 0).hasValue());
  // Rows 6..7 of a 10 x 2 tensor (rank 2 of 4), and rank 3's columns 8..9 of 2 x 10.
  const std::string all = iota(20);
  EXPECT_EQ(ir::sliceShard(all, {10, 2}, 1, Sharding::split(0, 4), 2),
            std::string("\x0c\x0d\x0e\x0f"));
  EXPECT_EQ(ir::sliceShard(all, {2, 10}, 1, Sharding::split(1, 4), 3),
            std::string("\x08\x09\x12\x13"));
  for (const auto &[whole, s] : {std::pair{std::vector<int64_t>{10, 2}, Sharding::split(0, 4)},
                                 std::pair{std::vector<int64_t>{2, 10}, Sharding::split(1, 4)},
                                 std::pair{std::vector<int64_t>{2, 10}, Sharding::split(1, 3)}}) {
    std::string back(all.size(), '\x7f');
    for (int64_t r = 0; r < s.parts; ++r)
      ir::placeShard(back, whole, 1, s, r, ir::sliceShard(all, whole, 1, s, r));
    EXPECT_EQ(back, all) << s.text();
  }
}

TEST(Sharding, BlockedSliceTakesEachBlocksPart) {
  // One row of 6 = 3 blocks (q, k, v) of 2, split in 2: rank 1 holds q1, k1, v1.
  const std::string row = iota(6);
  EXPECT_EQ(ir::sliceShard(row, {6}, 1, Sharding::split(0, 2, 3), 1), std::string("\x01\x03\x05"));
  EXPECT_EQ(ir::sliceShard(row, {6}, 1, Sharding::split(0, 2), 1), std::string("\x03\x04\x05"));
}

TEST(Sharding, ReshapeSplitAxis) {
  // [B, T, 32] split on 32 -> [B, T, 4, 8]: the head axis carries the split.
  EXPECT_EQ(ops::reshapeSplitAxis({2, 16, 32}, {2, 16, 4, 8}, 2, 2, 1), 2);
  // and back
  EXPECT_EQ(ops::reshapeSplitAxis({2, 16, 4, 8}, {2, 16, 32}, 2, 2, 1), 2);
  // merged with an earlier axis: not a contiguous split
  EXPECT_EQ(ops::reshapeSplitAxis({2, 16, 32}, {2, 512}, 2, 2, 1), -1);
  // 3 heads do not split in 2
  EXPECT_EQ(ops::reshapeSplitAxis({2, 24}, {2, 3, 8}, 1, 2, 1), -1);
  // inserted unit axes are skipped
  EXPECT_EQ(ops::reshapeSplitAxis({4, 32}, {4, 1, 32}, 1, 2, 1), 2);
}

/// Runs `op`'s rule on a node with the given input layouts and global dims.
ops::ShardingContext ask(ir::Graph &g, const std::string &op,
                         const std::vector<std::vector<int64_t>> &ins,
                         const std::vector<Sharding> &layouts, std::vector<int64_t> out,
                         const std::map<std::string, ir::Attribute> &attrs = {},
                         bool keeps = true) {
  std::vector<ir::Value *> values;
  for (size_t i = 0; i < ins.size(); ++i) {
    ir::Value *v =
        g.createValue(g.uniqueName("x"), {ir::DType::kFloat32, ir::Shape::ofStatic(ins[i])});
    g.addInput(v);
    values.push_back(v);
  }
  ir::Node *n = g.addNode(op, values, {g.uniqueName("y")}, "", g.uniqueNodeName(op));
  for (const auto &[k, a] : attrs)
    n->setAttr(k, a);
  ops::ShardingContext ctx(*n, layouts, std::vector<bool>(ins.size(), false), ins, {out}, 2,
                           [keeps](const ir::Value *, const Sharding &) { return keeps; });
  Status s = ops::lookupOp("", op)->sharding(ctx);
  EXPECT_TRUE(s.isOk()) << s.message();
  return ctx;
}

TEST(ShardingRules, MatMulRowParallelIsPartial) {
  ir::Graph g;
  auto c =
      ask(g, "MatMul", {{4, 8}, {8, 6}}, {Sharding::split(1, 2), Sharding::split(0, 2)}, {4, 6});
  EXPECT_EQ(c.required(0), Sharding::split(1, 2));
  EXPECT_EQ(c.required(1), Sharding::split(0, 2));
  EXPECT_TRUE(c.output(0).isPartial());
}

TEST(ShardingRules, MatMulColumnParallelCopiesItsInput) {
  ir::Graph g;
  auto c =
      ask(g, "MatMul", {{4, 8}, {8, 6}}, {Sharding::replicated(), Sharding::split(1, 2)}, {4, 6});
  EXPECT_TRUE(c.copyRequired(0));
  EXPECT_EQ(c.output(0), Sharding::split(1, 2));
}

TEST(ShardingRules, ElementwiseBroadcastsAlongTheSplit) {
  ir::Graph g;
  // [4, 6] split on 1 plus a bias [6]: the bias is split on its axis 0; plus [4, 1]: replicated.
  auto c = ask(g, "Add", {{4, 6}, {6}}, {Sharding::split(1, 2), Sharding::replicated()}, {4, 6});
  EXPECT_EQ(c.required(1), Sharding::split(0, 2));
  EXPECT_EQ(c.output(0), Sharding::split(1, 2));
  auto d = ask(g, "Mul", {{4, 6}, {4, 1}}, {Sharding::split(1, 2), Sharding::replicated()}, {4, 6});
  EXPECT_TRUE(d.required(1).isReplicated());
}

TEST(ShardingRules, SoftmaxOverTheSplitAxisGathers) {
  ir::Graph g;
  auto c = ask(g, "Softmax", {{2, 4, 8}}, {Sharding::split(2, 2)}, {2, 4, 8},
               {{"axis", ir::Attribute(int64_t{-1})}});
  EXPECT_TRUE(c.required(0).isReplicated());
  auto d = ask(g, "Softmax", {{2, 4, 8}}, {Sharding::split(1, 2)}, {2, 4, 8},
               {{"axis", ir::Attribute(int64_t{-1})}});
  EXPECT_EQ(d.output(0), Sharding::split(1, 2));
}

TEST(ShardingRules, TransposeMovesTheSplit) {
  ir::Graph g;
  auto c = ask(g, "Transpose", {{2, 4, 8}}, {Sharding::split(1, 2)}, {2, 8, 4},
               {{"perm", ir::Attribute(std::vector<int64_t>{0, 2, 1})}});
  EXPECT_EQ(c.output(0), Sharding::split(2, 2));
}

} // namespace
} // namespace dtc
