// The --freeze matcher (passes/Autodiff.h, compileFreezePattern): llvm::Regex with the
// ECMAScript shorthands translated; a 100,000-character name is matched without recursion
// (std::regex overflowed the stack there: issue 13, finding 2).
#include "passes/Autodiff.h"

#include <gtest/gtest.h>

#include <string>

namespace dtc::passes {
namespace {

bool matches(const std::string &pattern, const std::string &name) {
  auto m = compileFreezePattern(pattern);
  EXPECT_TRUE(m.hasValue()) << pattern << ": " << m.status().message();
  return m.hasValue() && (*m)(name);
}

std::string refusal(const std::string &pattern) {
  auto m = compileFreezePattern(pattern);
  return m.hasValue() ? std::string("accepted") : m.status().message();
}

TEST(FreezePattern, SearchesLikeRegexSearch) {
  EXPECT_TRUE(matches("w.*", "conv.w"));
  EXPECT_TRUE(matches("^encoder\\.", "encoder.layer0.weight"));
  EXPECT_FALSE(matches("^encoder\\.", "decoder.encoder_x"));
  EXPECT_TRUE(matches("bn|bias$", "fc.bias"));
  EXPECT_FALSE(matches("bias$", "bias.extra"));
  EXPECT_TRUE(matches("layer(1|2)\\.", "layer2.w"));
  EXPECT_TRUE(matches("a{2,3}", "baab"));
  EXPECT_TRUE(matches("[[:upper:]]", "xY"));
}

TEST(FreezePattern, EcmaScriptShorthands) {
  EXPECT_TRUE(matches("layer\\d+\\.w", "layer12.w"));
  EXPECT_FALSE(matches("layer\\d+\\.w", "layerd.w")); // \d is a digit, not 'd'
  EXPECT_TRUE(matches("^\\w+$", "conv_1"));
  EXPECT_FALSE(matches("^\\w+$", "conv.1"));
  EXPECT_TRUE(matches("\\s", "a b"));
  EXPECT_TRUE(matches("^\\D+$", "abc"));
  EXPECT_TRUE(matches("[\\d.]+$", "w.12"));
  EXPECT_TRUE(matches("x.*?y", "x123y")); // lazy: same names as greedy
  EXPECT_TRUE(matches("[]a]", "]"));
}

TEST(FreezePattern, RefusesWhatPosixLacks) {
  EXPECT_NE(refusal("(?:a)").find("'(?' group"), std::string::npos) << refusal("(?:a)");
  EXPECT_NE(refusal("(a)\\1").find("'\\1'"), std::string::npos);
  EXPECT_NE(refusal("\\bw").find("'\\b'"), std::string::npos);
  EXPECT_NE(refusal("[\\]]").find("inside a bracket"), std::string::npos);
  EXPECT_NE(refusal("a\\").find("trailing backslash"), std::string::npos);
  EXPECT_NE(refusal("[ab").find("unterminated"), std::string::npos);
  EXPECT_NE(refusal("(ab").find("not a valid regular expression"), std::string::npos)
      << refusal("(ab");
  EXPECT_EQ(refusal("(?:a)").rfind("--freeze '(?:a)': ", 0), 0u);
}

TEST(FreezePattern, HundredThousandCharacterName) {
  const std::string name(100000, 'w');
  EXPECT_TRUE(matches("w.*", name));
  EXPECT_TRUE(matches("^(w|x)*$", name));
  EXPECT_FALSE(matches("^(w|x)*y$", name));
  EXPECT_FALSE(matches("w+$", name + "a"));
}

} // namespace
} // namespace dtc::passes
