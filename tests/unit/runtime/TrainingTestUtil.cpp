// Helpers for the training-runtime tests (see TrainingTestUtil.h).
#include "TrainingTestUtil.h"

#include "compiler/support/FileIO.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <unistd.h>

namespace dtc::rt::test {

namespace {

using namespace dtc::plan;

struct Builder {
  RankProgram *r;
  uint64_t next = 0;
  int add(const std::string &name, BufferKind kind, ir::DType dtype, std::vector<int64_t> shape,
          const std::string &source = "", const std::string &data = "") {
    Buffer *b = r->add_buffers();
    b->set_name(name);
    b->set_kind(kind);
    b->set_dtype(static_cast<int32_t>(dtype));
    int64_t n = 1;
    for (int64_t d : shape) {
      b->add_shape(d);
      n *= d;
    }
    const uint64_t size = static_cast<uint64_t>(n) * ir::dtypeSize(dtype);
    b->set_size_bytes(size);
    b->set_offset(next);
    next += (size + 63) / 64 * 64;
    if (!source.empty())
      b->set_source(source);
    if (!data.empty())
      b->set_data(data);
    r->set_arena_bytes(next);
    r->set_no_reuse_bytes(next);
    return r->buffers_size() - 1;
  }
  void kernel(const std::string &op, std::vector<int> in, std::vector<int> out,
              int64_t keepdims = -1) {
    KernelCall *k = r->add_instructions()->mutable_kernel();
    k->set_op(op);
    k->set_node(op + "_" + std::to_string(r->instructions_size()));
    for (int i : in)
      k->add_inputs(i);
    for (int o : out)
      k->add_outputs(o);
    if (keepdims >= 0) {
      Attr *a = k->add_attributes();
      a->set_name("keepdims");
      a->set_i(keepdims);
    }
  }
  void copy(int src, int dst) {
    Copy *c = r->add_instructions()->mutable_copy();
    c->set_src(src);
    c->set_dst(dst);
  }
};

std::string bytesOf(const void *p, size_t n) {
  return std::string(static_cast<const char *>(p), n);
}

} // namespace

TempDir::TempDir() {
  char tmpl[] = "/tmp/dtc-train-test-XXXXXX";
  path = mkdtemp(tmpl);
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

HostArray f32(const std::string &name, std::vector<int64_t> shape, std::vector<float> v) {
  HostArray a;
  a.name = name;
  a.dtype = ir::DType::kFloat32;
  a.shape = std::move(shape);
  a.bytes = bytesOf(v.data(), v.size() * 4);
  return a;
}

std::vector<float> values(const HostArray &a) {
  std::vector<float> v(a.bytes.size() / 4);
  std::memcpy(v.data(), a.bytes.data(), v.size() * 4);
  return v;
}

plan::Plan makeRegressionPlan(const std::string &dir, const RegressionConfig &cfg) {
  const int64_t B = cfg.batch, F = cfg.features;
  std::string init;
  for (size_t i = 0; i < cfg.w0.size(); ++i)
    init += (i ? ", " : "") + std::to_string(cfg.w0[i]);
  const std::string model = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                            "g (float[" +
                            std::to_string(B) + "," + std::to_string(F) + "] x) => (float[" +
                            std::to_string(B) +
                            "] y)\n"
                            "<float[" +
                            std::to_string(F) + "] w = {" + init +
                            "}>\n"
                            "{\n  xw = Mul(x, w)\n"
                            "  ax = Constant<value = int64[1] {1}>()\n"
                            "  y = ReduceSum<keepdims = 0>(xw, ax)\n}\n";
  const std::string modelPath = (std::filesystem::path(dir) / "model.onnxtxt").string();
  EXPECT_TRUE(writeFileAtomically(modelPath, model).isOk());

  Plan p;
  p.set_format_version(kPlanFormatVersion);
  p.set_producer("hand-made test plan");
  p.set_mode(MODE_TRAINING);
  p.set_world_size(1);
  p.mutable_model()->set_path("model.onnxtxt");
  p.mutable_model()->set_checksum(*checksumFile(modelPath));
  p.mutable_model()->set_checksum_algorithm(kChecksumAlgorithm);
  p.mutable_model()->set_size_bytes(model.size());
  Hyperparameters *hp = p.mutable_hyperparameters();
  hp->set_batch_size(B);
  hp->set_loss("mse");
  hp->set_optimizer("sgd");
  hp->set_lr(cfg.lr);
  hp->set_momentum(cfg.momentum);
  hp->set_lr_schedule("constant");
  hp->set_grad_accum_steps(cfg.gradAccumSteps);
  RankInfo *ri = p.add_ranks();
  ri->set_rank(0);
  ri->mutable_device()->set_type(DEVICE_CPU);
  RankProgram *r = p.add_programs();
  r->add_ranks(0);
  r->set_alignment(kCpuAlignment);
  Builder b{r};
  using ir::DType;
  const int64_t one = 1, zero = 0;
  const float twoOverB = 2.0f / static_cast<float>(B);
  const int x = b.add("x", BUFFER_INPUT, DType::kFloat32, {B, F});
  const int label = b.add("label", BUFFER_INPUT, DType::kFloat32, {B});
  const int lr = b.add("dtc::lr", BUFFER_INPUT, DType::kFloat32, {});
  const int step = b.add("dtc::step", BUFFER_INPUT, DType::kInt64, {});
  const int rng = b.add("dtc::rng", BUFFER_INPUT, DType::kInt64, {3});
  const int w = b.add("w", BUFFER_PARAMETER, DType::kFloat32, {F}, "w");
  const int g = b.add("w.grad", BUFFER_GRADIENT, DType::kFloat32, {F}, "w");
  const int m = b.add("w.momentum", BUFFER_OPTIMIZER_STATE, DType::kFloat32, {F});
  const int ax1 = b.add("axes1", BUFFER_CONSTANT, DType::kInt64, {1}, "", bytesOf(&one, 8));
  const int ax0 = b.add("axes0", BUFFER_CONSTANT, DType::kInt64, {1}, "", bytesOf(&zero, 8));
  const int c2b =
      b.add("two_over_b", BUFFER_CONSTANT, DType::kFloat32, {}, "", bytesOf(&twoOverB, 4));
  const int mom =
      b.add("momentum", BUFFER_CONSTANT, DType::kFloat32, {}, "", bytesOf(&cfg.momentum, 4));
  const int xw = b.add("xw", BUFFER_ACTIVATION, DType::kFloat32, {B, F});
  const int pred = b.add("pred", BUFFER_OUTPUT, DType::kFloat32, {B});
  const int diff = b.add("diff", BUFFER_ACTIVATION, DType::kFloat32, {B});
  const int sq = b.add("sq", BUFFER_ACTIVATION, DType::kFloat32, {B});
  const int loss = b.add("loss", BUFFER_OUTPUT, DType::kFloat32, {});
  const int scaled = b.add("scaled", BUFFER_ACTIVATION, DType::kFloat32, {B});
  const int scaled2 = b.add("scaled2d", BUFFER_ACTIVATION, DType::kFloat32, {B, 1});
  const int gx = b.add("gx", BUFFER_ACTIVATION, DType::kFloat32, {B, F});
  const int mScaled = b.add("m_scaled", BUFFER_ACTIVATION, DType::kFloat32, {F});
  const int mNew = b.add("m_new", BUFFER_ACTIVATION, DType::kFloat32, {F});
  const int upd = b.add("update", BUFFER_ACTIVATION, DType::kFloat32, {F});
  const int wNew = b.add("w_new", BUFFER_ACTIVATION, DType::kFloat32, {F});
  b.kernel("Mul", {x, w}, {xw});
  b.kernel("ReduceSum", {xw, ax1}, {pred}, 0);
  b.kernel("Sub", {pred, label}, {diff});
  b.kernel("Mul", {diff, diff}, {sq});
  b.kernel("ReduceMean", {sq, ax0}, {loss}, 0);
  b.kernel("Mul", {diff, c2b}, {scaled});
  b.copy(scaled, scaled2);
  b.kernel("Mul", {x, scaled2}, {gx});
  b.kernel("ReduceSum", {gx, ax0}, {g}, 0);
  const int optimizerBegin = r->instructions_size();
  b.kernel("Mul", {m, mom}, {mScaled});
  b.kernel("Add", {mScaled, g}, {mNew});
  b.copy(mNew, m);
  b.kernel("Mul", {mNew, lr}, {upd});
  b.kernel("Sub", {w, upd}, {wNew});
  b.copy(wNew, w);
  for (auto [name, buf] : std::vector<std::pair<std::string, int>>{
           {"x", x}, {"label", label}, {"dtc::lr", lr}, {"dtc::step", step}, {"dtc::rng", rng}}) {
    Binding *in = r->add_inputs();
    in->set_name(name);
    in->set_buffer(buf);
  }
  for (auto [name, buf] :
       std::vector<std::pair<std::string, int>>{{"pred", pred}, {"loss", loss}}) {
    Binding *out = r->add_outputs();
    out->set_name(name);
    out->set_buffer(buf);
  }
  Training *t = r->mutable_training();
  t->set_loss_output("loss");
  t->set_prediction_output("pred");
  t->set_label_input("label");
  t->set_ignore_index(-100);
  t->set_optimizer_begin(optimizerBegin);
  t->set_lr_input("dtc::lr");
  t->set_step_input("dtc::step");
  t->set_rng_input("dtc::rng");
  TrainedParameter *tp = t->add_parameters();
  tp->set_name("w");
  tp->set_buffer(w);
  tp->set_gradient(g);
  tp->add_state(m);
  return p;
}

void writeRegressionData(const std::string &path, int64_t n, int64_t features,
                         const std::vector<float> &wTrue, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> x(static_cast<size_t>(n * features)), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t f = 0; f < features; ++f) {
      float v = static_cast<float>(static_cast<int>(gen() % 2001) - 1000) / 1000.0f;
      x[i * features + f] = v;
      s += static_cast<double>(v) * wTrue[f];
    }
    y[i] = static_cast<float>(s);
  }
  ASSERT_TRUE(writeNpz(path, {f32("x", {n, features}, x), f32("label", {n}, y)}).isOk());
}

} // namespace dtc::rt::test
