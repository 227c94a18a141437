// Finite-difference gradient checking (see GradCheck.h).
#include "tests/unit/training/GradCheck.h"

#include "compiler/plan/Lowering.h"
#include "ops/Gradient.h"
#include "passes/Autodiff.h"
#include "runtime/Executor.h"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

namespace dtc::test {
namespace {

ir::TensorDataPtr dataOf(const GradInput &in, const std::vector<float> &f) {
  if (in.dtype == ir::DType::kFloat32)
    return ir::TensorData::fromFloats(in.name, in.shape, f);
  if (in.dtype == ir::DType::kInt64)
    return ir::TensorData::fromInt64s(in.name, in.shape, in.ints);
  std::string bytes;
  for (int64_t v : in.ints)
    bytes.push_back(static_cast<char>(v != 0));
  return ir::TensorData::fromBytes(in.name, in.dtype, in.shape, bytes);
}

rt::HostArray arrayOf(const GradInput &in, const std::vector<float> &f) {
  rt::HostArray a;
  a.name = in.name;
  a.dtype = in.dtype;
  a.shape = in.shape;
  if (in.dtype == ir::DType::kFloat32) {
    a.bytes.assign(reinterpret_cast<const char *>(f.data()), f.size() * sizeof(float));
  } else if (in.dtype == ir::DType::kInt64) {
    a.bytes.assign(reinterpret_cast<const char *>(in.ints.data()), in.ints.size() * 8);
  } else {
    for (int64_t v : in.ints)
      a.bytes.push_back(static_cast<char>(v != 0));
  }
  return a;
}

std::vector<float> floatsOf(const rt::HostArray &a) {
  std::vector<float> out(a.bytes.size() / sizeof(float));
  std::memcpy(out.data(), a.bytes.data(), out.size() * sizeof(float));
  return out;
}

int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The f32 contents of every input: given, or uniform random in [lo, hi].
std::vector<std::vector<float>> inputValues(const std::vector<GradInput> &inputs,
                                            std::mt19937 &rng) {
  std::vector<std::vector<float>> values(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GradInput &in = inputs[i];
    if (in.dtype != ir::DType::kFloat32)
      continue;
    values[i] = in.values;
    if (values[i].empty()) {
      std::uniform_real_distribution<float> u(in.lo, in.hi);
      values[i].resize(static_cast<size_t>(count(in.shape)));
      for (float &v : values[i])
        v = u(rng);
    }
  }
  return values;
}

std::string checkGraph(ir::Graph &g, const std::vector<ir::Value *> &outputs,
                       const std::vector<GradInput> &inputs, std::vector<std::vector<float>> values,
                       const std::vector<ir::Value *> &wrt, const std::vector<size_t> &wrtIndex,
                       std::mt19937 &rng, const GradCheckOptions &opts, const std::string &op,
                       Diagnostics &diags);

} // namespace

std::string gradCheck(const std::string &op, const std::vector<GradInput> &inputs,
                      const std::map<std::string, ir::Attribute> &attrs, size_t numOutputs,
                      const GradCheckOptions &opts, const std::string &domain) {
  std::mt19937 rng(opts.seed);
  std::vector<std::vector<float>> values = inputValues(inputs, rng);

  ir::Graph g;
  g.setOpset("", 21);
  Diagnostics diags;
  std::vector<ir::Value *> ins, wrt;
  std::vector<size_t> wrtIndex;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GradInput &in = inputs[i];
    if (in.name.empty()) { // an omitted optional input
      ins.push_back(nullptr);
      continue;
    }
    if (in.constant) {
      ins.push_back(g.addConstant(in.name, dataOf(in, values[i])));
      continue;
    }
    ir::Value *v = g.createValue(in.name, ir::TensorType{in.dtype, ir::Shape::ofStatic(in.shape)});
    g.addInput(v);
    ins.push_back(v);
    if (in.differentiable && in.dtype == ir::DType::kFloat32) {
      wrt.push_back(v);
      wrtIndex.push_back(i);
    }
  }
  std::vector<std::string> outNames;
  for (size_t o = 0; o < numOutputs; ++o)
    outNames.push_back("y" + std::to_string(o));
  ir::Node *n = g.addNode(op, ins, outNames, domain, "op");
  for (const auto &[k, a] : attrs)
    n->setAttr(k, a);
  if (Status s = ops::inferNode(*n, diags); !s.isOk())
    return "infer: " + s.message();
  std::vector<ir::Value *> outs;
  for (size_t o = 0; o < numOutputs; ++o)
    outs.push_back(n->output(o));
  return checkGraph(g, outs, inputs, std::move(values), wrt, wrtIndex, rng, opts, op, diags);
}

std::string gradCheckGraph(ir::Graph &g, const std::vector<std::string> &outputs,
                           const std::vector<GradInput> &inputs, const GradCheckOptions &opts,
                           const std::string &label) {
  std::mt19937 rng(opts.seed);
  std::vector<std::vector<float>> values = inputValues(inputs, rng);
  Diagnostics diags;
  std::vector<ir::Value *> wrt, outs;
  std::vector<size_t> wrtIndex;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GradInput &in = inputs[i];
    ir::Value *v = g.findValue(in.name);
    if (!v || v->producer() || v->isInitializer())
      return "'" + in.name + "' is not a graph input";
    if (v->shape() != ir::Shape::ofStatic(in.shape) || v->dtype() != in.dtype)
      return "graph input '" + in.name + "' has type " + v->type().str();
    if (in.differentiable && in.dtype == ir::DType::kFloat32) {
      wrt.push_back(v);
      wrtIndex.push_back(i);
    }
  }
  for (const std::string &o : outputs) {
    ir::Value *v = g.findValue(o);
    if (!v)
      return "no value '" + o + "'";
    outs.push_back(v);
  }
  // The graph's own outputs are replaced by the loss and the gradients.
  g.setOutputs({});
  return checkGraph(g, outs, inputs, std::move(values), wrt, wrtIndex, rng, opts, label, diags);
}

namespace {

std::string checkGraph(ir::Graph &g, const std::vector<ir::Value *> &outputs,
                       const std::vector<GradInput> &inputs, std::vector<std::vector<float>> values,
                       const std::vector<ir::Value *> &wrt, const std::vector<size_t> &wrtIndex,
                       std::mt19937 &rng, const GradCheckOptions &opts, const std::string &op,
                       Diagnostics &diags) {
  const size_t numOutputs = outputs.size();
  // L = sum_o ReduceSum(Y_o * R_o).
  ir::Value *loss = nullptr;
  for (size_t o = 0; o < numOutputs; ++o) {
    ir::Value *y = outputs[o];
    bool wanted = opts.lossOutputs.empty()
                      ? y->dtype() == ir::DType::kFloat32
                      : std::find(opts.lossOutputs.begin(), opts.lossOutputs.end(), o) !=
                            opts.lossOutputs.end();
    if (!wanted)
      continue;
    std::vector<int64_t> shape = y->shape().staticSizes();
    std::vector<float> r(static_cast<size_t>(count(shape)));
    std::uniform_real_distribution<float> u(0.5f, 1.5f);
    for (float &v : r)
      v = u(rng) * (rng() % 2 ? 1.f : -1.f);
    const std::string rn = "r" + std::to_string(o);
    ir::Value *rv = g.addConstant(rn, ir::TensorData::fromFloats(rn, shape, r));
    ir::Node *mul = g.addNode("Mul", {y, rv}, {"m" + std::to_string(o)});
    ir::Node *sum = g.addNode("ReduceSum", {mul->output(0)}, {"s" + std::to_string(o)});
    sum->setAttr("keepdims", ir::Attribute(int64_t{0}));
    for (ir::Node *x : {mul, sum})
      if (Status s = ops::inferNode(*x, diags); !s.isOk())
        return "loss: " + s.message();
    if (!loss) {
      loss = sum->output(0);
    } else {
      ir::Node *add = g.addNode("Add", {loss, sum->output(0)}, {"l" + std::to_string(o)});
      if (Status s = ops::inferNode(*add, diags); !s.isOk())
        return "loss: " + s.message();
      loss = add->output(0);
    }
  }
  if (!loss)
    return "no float output enters the loss";
  g.addOutput(loss);
  auto grads = passes::buildGradients(g, loss, wrt, diags);
  if (!grads)
    return "autodiff: " + grads.status().message();
  for (size_t k = 0; k < wrt.size(); ++k) {
    if (!(*grads)[k])
      return "input '" + wrt[k]->name() + "' got no gradient";
    g.addOutput((*grads)[k]);
  }

  plan::LowerOptions lopts;
  lopts.channelsLast = opts.channelsLast;
  auto planOr = plan::lowerInference(g, lopts);
  if (!planOr)
    return "lower: " + planOr.status().message();
  auto exOr = rt::Executor::create(std::move(*planOr), rt::ExecutorOptions{});
  if (!exOr)
    return "executor: " + exOr.status().message();
  rt::Executor &ex = **exOr;

  auto evaluate = [&](std::vector<rt::HostArray> *outs) -> std::string {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i].name.empty() && !inputs[i].constant)
        if (Status s = ex.setInput(arrayOf(inputs[i], values[i])); !s.isOk())
          return "setInput: " + s.message();
    if (Status s = ex.run(); !s.isOk())
      return "run: " + s.message();
    auto o = ex.outputs();
    if (!o)
      return "outputs: " + o.status().message();
    *outs = std::move(*o);
    return "";
  };
  std::vector<rt::HostArray> base;
  if (std::string e = evaluate(&base); !e.empty())
    return e;
  // Outputs: loss first, then one gradient per wrt value (duplicate names are bound once).
  auto outputNamed = [&](const std::vector<rt::HostArray> &outs, const std::string &name) {
    for (const rt::HostArray &a : outs)
      if (a.name == name)
        return floatsOf(a);
    return std::vector<float>{};
  };
  for (size_t k = 0; k < wrt.size(); ++k) {
    const size_t i = wrtIndex[k];
    const std::vector<float> analytic = outputNamed(base, (*grads)[k]->name());
    const int64_t numel = static_cast<int64_t>(values[i].size());
    if (static_cast<int64_t>(analytic.size()) != numel)
      return "gradient of '" + inputs[i].name + "' has " + std::to_string(analytic.size()) +
             " elements, expected " + std::to_string(numel);
    const int64_t stride = std::max<int64_t>(1, numel / std::max<int64_t>(1, opts.maxElements));
    for (int64_t e = 0; e < numel; e += stride) {
      const float saved = values[i][e];
      std::vector<rt::HostArray> plus, minus;
      values[i][e] = saved + static_cast<float>(opts.step);
      if (std::string err = evaluate(&plus); !err.empty())
        return err;
      values[i][e] = saved - static_cast<float>(opts.step);
      if (std::string err = evaluate(&minus); !err.empty())
        return err;
      values[i][e] = saved;
      const double lp = outputNamed(plus, loss->name())[0];
      const double lm = outputNamed(minus, loss->name())[0];
      const double numeric = (lp - lm) / (2 * opts.step);
      const double a = analytic[e];
      if (!(std::abs(a - numeric) <= opts.atol + opts.rtol * std::abs(numeric))) {
        std::ostringstream os;
        os << op << ": input '" << inputs[i].name << "' element " << e << ": analytic " << a
           << ", numeric " << numeric;
        return os.str();
      }
    }
  }
  return "";
}

} // namespace

std::vector<float> awayFromZero(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(rng) * (rng() % 2 ? 1.f : -1.f);
  return v;
}

std::vector<float> distinct(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>((i * 37) % n) * 0.05f - 1.0f;
  return v;
}

} // namespace dtc::test
