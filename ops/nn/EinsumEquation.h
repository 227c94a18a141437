// The equation of Einsum (onnx/docs/Operators.md#Einsum, numpy.einsum's subscripts), parsed into
// labels once the operands' ranks are known. Header-only: shared by the op definition
// (ops/nn/Einsum.cpp: inference, cost, gradient) and the CPU kernel (ops/cpu/Einsum.cpp), which
// link nothing of each other.
//
// Terms are letters (a-z, A-Z) and at most one "..." each; spaces are ignored. The ellipsis
// stands for the operand's remaining leading-to-trailing dims, which broadcast against the other
// operands' ellipsis dims aligned from the right (numpy). Without "->" (implicit form) the output
// is the ellipsis dims followed by the letters that occur exactly once, in alphabetical (ASCII)
// order. In the explicit form, an output without "..." is an error when the ellipsis stands for
// one or more dims (numpy and onnxruntime refuse it too).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

namespace dtc::ops::einsum {

/// Labels 0..51 are the letters (kLetters order); ellipsis dim e of kMaxEllipsis (counted from the
/// left of the broadcast ellipsis block) is label 52 + e.
inline constexpr const char *kLetters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
inline constexpr int kNumLetters = 52;

struct Equation {
  std::vector<std::vector<int>> inputs; ///< per operand, the label of each of its axes
  std::vector<int> output;              ///< the label of each output axis
  int ellipsisRank = 0;                 ///< rank of the broadcast ellipsis block
  int numLabels() const { return kNumLetters + ellipsisRank; }
  bool isEllipsis(int label) const { return label >= kNumLetters; }
};

inline int letterLabel(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return 26 + (c - 'a');
  return -1;
}

/// Parses `text` for operands of the given ranks. Returns an empty string and fills `eq`, or an
/// error text (the caller names the node and the equation).
inline std::string parse(const std::string &text, const std::vector<int64_t> &ranks, Equation &eq) {
  std::string s;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)))
      s += c;
  std::string lhs = s, rhs;
  const bool explicitOut = s.find("->") != std::string::npos;
  if (explicitOut) {
    lhs = s.substr(0, s.find("->"));
    rhs = s.substr(s.find("->") + 2);
    if (rhs.find("->") != std::string::npos)
      return "more than one '->'";
  }
  std::vector<std::string> terms;
  size_t start = 0;
  for (;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    return "it has " + std::to_string(terms.size()) + " input term(s) for " +
           std::to_string(ranks.size()) + " input(s)";
  // Letters and the ellipsis position of one term.
  struct Term {
    std::vector<int> letters; ///< -1 marks the ellipsis
    bool ellipsis = false;
  };
  auto split = [](const std::string &t, Term &out) -> std::string {
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 3, "...") == 0) {
        if (out.ellipsis)
          return "term '" + t + "' has more than one '...'";
        out.ellipsis = true;
        out.letters.push_back(-1);
        i += 3;
        continue;
      }
      int l = letterLabel(t[i]);
      if (l < 0) {
        // A byte of a multi-byte UTF-8 letter or a control character is printed as \xNN (one
        // byte alone would make the message invalid UTF-8).
        const unsigned char c = static_cast<unsigned char>(t[i]);
        std::string shown(1, t[i]);
        if (c < 0x20 || c >= 0x7f) {
          static const char *const kHex = "0123456789abcdef";
          shown = std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
        }
        return "term '" + t + "' has the character '" + shown + "' (letters and '...' only)";
      }
      out.letters.push_back(l);
      ++i;
    }
    return "";
  };
  std::vector<Term> parsed(terms.size());
  eq = Equation{};
  for (size_t i = 0; i < terms.size(); ++i) {
    if (std::string err = split(terms[i], parsed[i]); !err.empty())
      return err;
    const int64_t named =
        static_cast<int64_t>(parsed[i].letters.size()) - (parsed[i].ellipsis ? 1 : 0);
    if (ranks[i] < 0)
      return "input " + std::to_string(i) + " has an unknown rank";
    if (parsed[i].ellipsis ? ranks[i] < named : ranks[i] != named)
      return "term '" + terms[i] + "' does not match input " + std::to_string(i) + " of rank " +
             std::to_string(ranks[i]);
    if (parsed[i].ellipsis)
      eq.ellipsisRank = std::max<int>(eq.ellipsisRank, static_cast<int>(ranks[i] - named));
  }
  for (size_t i = 0; i < terms.size(); ++i) {
    const int e = static_cast<int>(ranks[i]) -
                  (static_cast<int>(parsed[i].letters.size()) - (parsed[i].ellipsis ? 1 : 0));
    std::vector<int> labels;
    for (int l : parsed[i].letters) {
      if (l >= 0) {
        labels.push_back(l);
        continue;
      }
      for (int k = 0; k < e; ++k)
        labels.push_back(kNumLetters + eq.ellipsisRank - e + k);
    }
    eq.inputs.push_back(std::move(labels));
  }
  std::vector<int> count(kNumLetters, 0);
  for (const std::vector<int> &in : eq.inputs)
    for (int l : in)
      if (l < kNumLetters)
        ++count[static_cast<size_t>(l)];
  if (!explicitOut) {
    for (int k = 0; k < eq.ellipsisRank; ++k)
      eq.output.push_back(kNumLetters + k);
    for (int l = 0; l < kNumLetters; ++l)
      if (count[static_cast<size_t>(l)] == 1)
        eq.output.push_back(l);
    return "";
  }
  Term out;
  if (std::string err = split(rhs, out); !err.empty())
    return err;
  if (eq.ellipsisRank > 0 && !out.ellipsis)
    return "the inputs' '...' stands for " + std::to_string(eq.ellipsisRank) +
           " dim(s) but the output has no '...'";
  std::vector<bool> seen(kNumLetters, false);
  for (int l : out.letters) {
    if (l < 0) {
      for (int k = 0; k < eq.ellipsisRank; ++k)
        eq.output.push_back(kNumLetters + k);
      continue;
    }
    if (seen[static_cast<size_t>(l)])
      return std::string("the output repeats '") + kLetters[l] + "'";
    if (count[static_cast<size_t>(l)] == 0)
      return std::string("the output's '") + kLetters[l] + "' is in no input term";
    seen[static_cast<size_t>(l)] = true;
    eq.output.push_back(l);
  }
  return "";
}

/// Size of every label from the operands' static dims: a letter's dims must agree; an ellipsis
/// dim broadcasts (1 against n). Labels that occur nowhere get 1. Returns an error text or "".
inline std::string labelSizes(const Equation &eq, const std::vector<std::vector<int64_t>> &dims,
                              std::vector<int64_t> &sizes) {
  sizes.assign(static_cast<size_t>(eq.numLabels()), -1);
  for (size_t i = 0; i < eq.inputs.size(); ++i)
    for (size_t a = 0; a < eq.inputs[i].size(); ++a) {
      const int l = eq.inputs[i][a];
      int64_t &s = sizes[static_cast<size_t>(l)];
      const int64_t d = dims[i][a];
      if (s < 0 || (eq.isEllipsis(l) && s == 1))
        s = d;
      else if (d != s && !(eq.isEllipsis(l) && d == 1))
        return eq.isEllipsis(l)
                   ? "the '...' dims of input " + std::to_string(i) + " do not broadcast"
                   : std::string("index '") + kLetters[l] + "' has sizes " + std::to_string(s) +
                         " and " + std::to_string(d);
    }
  for (int64_t &s : sizes)
    if (s < 0)
      s = 1;
  return "";
}

} // namespace dtc::ops::einsum
