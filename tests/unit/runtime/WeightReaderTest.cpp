// Unit tests of runtime/io/WeightReader: every storage form (raw_data, typed fields, external
// data) and every slice (axis 0, middle, last, blocked Q/K/V, uneven ranges) against the bytes the
// ONNX importer gives for the same model (sliced with ir::sliceShard for even shards), laziness
// (only the slice's bytes are read from external files), untied initializer names, and the errors
// (missing name, wrong type, bad slice, truncated or escaping external data).
#include "runtime/io/WeightReader.h"

#include "compiler/ir/Sharding.h"
#include "compiler/onnx/Importer.h"
#include "compiler/onnx/ModelFile.h"
#include "tests/unit/TempDir.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace dtc::rt {
namespace {

namespace fs = std::filesystem;

/// A fresh temporary folder ("dtc-weights-XXXXXX"), removed at the end of the test.
class TempDir : public dtc::test::TempDir {
public:
  TempDir() : dtc::test::TempDir("dtc-weights") {}
};

std::string messageOf(const Status &s) { return s.message(); }
template <typename T> std::string messageOf(const Expected<T> &e) {
  return e ? std::string() : e.status().message();
}

/// Distinct float values 0.25 * i - 7, so any misplaced element shows.
std::vector<float> iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i) - 7.0f;
  return v;
}

std::string bytesOf(const std::vector<float> &v) {
  return std::string(reinterpret_cast<const char *>(v.data()), v.size() * sizeof(float));
}

int64_t count(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

onnx::TensorProto tensor(const std::string &name, int dtype, const std::vector<int64_t> &dims) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(dtype);
  for (int64_t d : dims)
    t.add_dims(d);
  return t;
}

onnx::TensorProto rawTensor(const std::string &name, const std::vector<int64_t> &dims) {
  onnx::TensorProto t = tensor(name, onnx::TensorProto::FLOAT, dims);
  t.set_raw_data(bytesOf(iota(count(dims))));
  return t;
}

onnx::TensorProto floatDataTensor(const std::string &name, const std::vector<int64_t> &dims) {
  onnx::TensorProto t = tensor(name, onnx::TensorProto::FLOAT, dims);
  for (float f : iota(count(dims)))
    t.add_float_data(f);
  return t;
}

onnx::TensorProto externalTensor(const std::string &name, const std::vector<int64_t> &dims,
                                 const std::string &location, int64_t offset) {
  onnx::TensorProto t = tensor(name, onnx::TensorProto::FLOAT, dims);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string &k, const std::string &v) {
    onnx::StringStringEntryProto *e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  add("offset", std::to_string(offset));
  add("length", std::to_string(count(dims) * 4));
  return t;
}

/// A valid model (one Relu) carrying `inits` as extra initializers.
onnx::ModelProto modelWith(const std::vector<onnx::TensorProto> &inits) {
  onnx::ModelProto m;
  Status s = onnxio::parseModelText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) { y = Relu(x) }
)",
                                    "test", m);
  EXPECT_TRUE(s.isOk()) << s.message();
  for (const onnx::TensorProto &t : inits)
    *m.mutable_graph()->add_initializer() = t;
  return m;
}

/// The model every storage test reads: the same [4,6], [2,6,4] and [4,12] values held in
/// raw_data, float_data and an external file (after 64 bytes of something else), plus int64,
/// float16 and bool tensors in their typed fields.
struct StorageModel {
  TempDir dir;
  std::string path;
  StorageModel() {
    std::vector<onnx::TensorProto> inits;
    std::string bin(64, '\x5a');
    int64_t off = 64;
    for (const auto &[suffix, dims] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"2d", {4, 6}}, {"3d", {2, 6, 4}}, {"qkv", {4, 12}}}) {
      inits.push_back(rawTensor("raw_" + suffix, dims));
      inits.push_back(floatDataTensor("typed_" + suffix, dims));
      inits.push_back(externalTensor("ext_" + suffix, dims, "weights/w.bin", off));
      bin += bytesOf(iota(count(dims)));
      off += count(dims) * 4;
    }
    onnx::TensorProto i64 = tensor("i64", onnx::TensorProto::INT64, {3, 4});
    for (int64_t i = 0; i < 12; ++i)
      i64.add_int64_data(i * 1000000007LL - 5);
    inits.push_back(i64);
    onnx::TensorProto f16 = tensor("f16", onnx::TensorProto::FLOAT16, {2, 4});
    for (int i = 0; i < 8; ++i)
      f16.add_int32_data(0x3c00 + i); // 1.0, 1.0009765625, ...
    inits.push_back(f16);
    onnx::TensorProto b = tensor("mask", onnx::TensorProto::BOOL, {2, 3});
    for (int i = 0; i < 6; ++i)
      b.add_int32_data(i % 3 == 0 ? 5 : 0); // non-zero is true: packed as 1
    inits.push_back(b);
    dir.file("weights/w.bin", bin + std::string(16, '\x7f'));
    path = dir.file("model.onnx", modelWith(inits).SerializeAsString());
  }
};

/// The importer's whole bytes of `name`.
std::string importedBytes(const std::string &path, const std::string &name, bool untie = false) {
  Diagnostics diags;
  auto g = onnxio::importModelFile(path, diags, {untie});
  EXPECT_TRUE(g) << messageOf(g);
  if (!g)
    return "<error>";
  const ir::Value *v = (*g)->findValue(name);
  EXPECT_TRUE(v && v->initializer()) << name;
  if (!v || !v->initializer())
    return "<none>";
  auto b = v->initializer()->bytes();
  EXPECT_TRUE(b) << messageOf(b);
  return b ? **b : "<error>";
}

TEST(WeightReader, WholeTensorsEqualTheImportersInEveryStorageForm) {
  StorageModel m;
  auto r = WeightReader::open(m.path);
  ASSERT_TRUE(r) << messageOf(r);
  struct Case {
    std::string name;
    ir::DType dtype;
    std::vector<int64_t> dims;
  } cases[] = {{"raw_2d", ir::DType::kFloat32, {4, 6}}, {"typed_2d", ir::DType::kFloat32, {4, 6}},
               {"ext_2d", ir::DType::kFloat32, {4, 6}}, {"ext_3d", ir::DType::kFloat32, {2, 6, 4}},
               {"i64", ir::DType::kInt64, {3, 4}},      {"f16", ir::DType::kFloat16, {2, 4}},
               {"mask", ir::DType::kBool, {2, 3}}};
  for (const Case &c : cases) {
    auto info = (*r)->info(c.name);
    ASSERT_TRUE(info) << messageOf(info);
    EXPECT_EQ(info->dtype, c.dtype) << c.name;
    EXPECT_EQ(info->dims, c.dims) << c.name;
    auto got = (*r)->read({c.name, c.dtype, c.dims, std::nullopt});
    ASSERT_TRUE(got) << messageOf(got);
    EXPECT_EQ(*got, importedBytes(m.path, c.name)) << c.name;
  }
  // The three forms hold the same values.
  EXPECT_EQ(*(*r)->read({"raw_3d", ir::DType::kFloat32, {2, 6, 4}, std::nullopt}),
            bytesOf(iota(48)));
  EXPECT_EQ(*(*r)->read({"typed_3d", ir::DType::kFloat32, {2, 6, 4}, std::nullopt}),
            bytesOf(iota(48)));
  // Bools are packed as 0/1 whatever the int32 value.
  EXPECT_EQ(*(*r)->read({"mask", ir::DType::kBool, {2, 3}, std::nullopt}),
            std::string("\x01\x00\x00\x01\x00\x00", 6));
}

TEST(WeightReader, EvenShardsAreIrSliceShardsOfTheImportersBytes) {
  StorageModel m;
  auto r = WeightReader::open(m.path);
  ASSERT_TRUE(r) << messageOf(r);
  // Every axis (first, middle, last), every part count dividing it, every rank, every storage.
  for (const char *form : {"raw_", "typed_", "ext_"})
    for (const auto &[suffix, dims, blocks] :
         std::vector<std::tuple<std::string, std::vector<int64_t>, int64_t>>{
             {"2d", {4, 6}, 1}, {"3d", {2, 6, 4}, 1}, {"qkv", {4, 12}, 3}}) {
      const std::string name = std::string(form) + suffix;
      const std::string whole = importedBytes(m.path, name);
      for (int64_t axis = 0; axis < static_cast<int64_t>(dims.size()); ++axis) {
        const int64_t b = axis == 1 ? blocks : 1; // the fused Q/K/V axis
        for (int64_t parts = 1; parts <= dims[axis] / b; ++parts) {
          if (dims[axis] % (b * parts) != 0)
            continue;
          const int64_t part = dims[axis] / b / parts;
          for (int64_t idx = 0; idx < parts; ++idx) {
            auto got = (*r)->read(
                {name, ir::DType::kFloat32, dims, WeightSlice{axis, idx * part, part, b}});
            ASSERT_TRUE(got) << messageOf(got);
            EXPECT_EQ(*got,
                      ir::sliceShard(whole, dims, 4, ir::Sharding::split(axis, parts, b), idx))
                << name << " axis " << axis << " parts " << parts << " blocks " << b << " rank "
                << idx;
          }
        }
      }
    }
}

TEST(WeightReader, UnevenSlicesTakeTheGivenRanges) {
  StorageModel m;
  auto r = WeightReader::open(m.path);
  ASSERT_TRUE(r) << messageOf(r);
  const std::vector<float> all = iota(48); // [2,6,4]
  // Axis 1, rows [1, 4) of 6: three of the six rows of each of the two outer slices.
  std::vector<float> want;
  for (int o = 0; o < 2; ++o)
    for (int row = 1; row < 4; ++row)
      for (int k = 0; k < 4; ++k)
        want.push_back(all[static_cast<size_t>((o * 6 + row) * 4 + k)]);
  for (const std::string name : {"raw_3d", "typed_3d", "ext_3d"}) {
    auto got = (*r)->read({name, ir::DType::kFloat32, {2, 6, 4}, WeightSlice{1, 1, 3, 1}});
    ASSERT_TRUE(got) << messageOf(got);
    EXPECT_EQ(*got, bytesOf(want)) << name;
    // An empty range is no bytes.
    got = (*r)->read({name, ir::DType::kFloat32, {2, 6, 4}, WeightSlice{2, 4, 0, 1}});
    ASSERT_TRUE(got) << messageOf(got);
    EXPECT_EQ(*got, "");
  }
  // The last axis, [3, 4) of 4 (a parameter server's rows would be axis 0: a single range).
  want.clear();
  for (int i = 3; i < 48; i += 4)
    want.push_back(all[static_cast<size_t>(i)]);
  auto got = (*r)->read({"ext_3d", ir::DType::kFloat32, {2, 6, 4}, WeightSlice{2, 3, 1, 1}});
  ASSERT_TRUE(got) << messageOf(got);
  EXPECT_EQ(*got, bytesOf(want));
}

TEST(WeightReader, ExternalDataIsReadOnlyWhereASliceNeedsIt) {
  StorageModel m;
  auto r = WeightReader::open(m.path);
  ASSERT_TRUE(r) << messageOf(r);
  EXPECT_EQ((*r)->externalBytesRead(), 0u); // opening reads no external data
  auto got = (*r)->read({"ext_2d", ir::DType::kFloat32, {4, 6}, WeightSlice{0, 1, 2, 1}});
  ASSERT_TRUE(got) << messageOf(got);
  EXPECT_EQ((*r)->externalBytesRead(), 2u * 6 * 4); // rows 1 and 2 only
  // A slice along the last axis: its four short runs, 12 bytes apart, are read in one range
  // from the first one's start to the last one's end.
  got = (*r)->read({"ext_2d", ir::DType::kFloat32, {4, 6}, WeightSlice{1, 0, 3, 1}});
  ASSERT_TRUE(got) << messageOf(got);
  EXPECT_EQ((*r)->externalBytesRead(), 2u * 6 * 4 + (3u * 6 + 3) * 4);
}

TEST(WeightReader, UntiedCopiesHaveTheNamesTheImporterGives) {
  TempDir dir;
  onnx::ModelProto m;
  ASSERT_TRUE(onnxio::parseModelText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) <float[2] ones = {1.0, 1.0}> {
  a = Mul(x, ones)
  y = Add(a, ones)
}
)",
                                     "test", m)
                  .isOk());
  const std::string path = dir.file("tied.onnx", m.SerializeAsString());
  WeightReader::Options untie;
  untie.untieInitializers = true;
  auto r = WeightReader::open(path, untie);
  ASSERT_TRUE(r) << messageOf(r);
  ASSERT_TRUE((*r)->has("ones.untied.1"));
  auto got = (*r)->read({"ones.untied.1", ir::DType::kFloat32, {2}, std::nullopt});
  ASSERT_TRUE(got) << messageOf(got);
  EXPECT_EQ(*got, importedBytes(path, "ones.untied.1", /*untie=*/true));
  EXPECT_EQ(*got, bytesOf({1.0f, 1.0f}));
  // Without the option the model's own names only.
  auto plain = WeightReader::open(path);
  ASSERT_TRUE(plain) << messageOf(plain);
  EXPECT_FALSE((*plain)->has("ones.untied.1"));
  EXPECT_TRUE((*plain)->has("ones"));
}

TEST(WeightReader, BadRequestsNameTheFileAndTheInitializer) {
  StorageModel m;
  auto r = WeightReader::open(m.path);
  ASSERT_TRUE(r) << messageOf(r);
  const std::string at = m.path + ": initializer ";
  EXPECT_EQ(messageOf((*r)->read({"nope", ir::DType::kFloat32, {4, 6}, std::nullopt})),
            at + "'nope': not found among the model's initializers");
  EXPECT_EQ(messageOf((*r)->info("nope")), at + "'nope': not found among the model's initializers");
  EXPECT_EQ(messageOf((*r)->read({"raw_2d", ir::DType::kFloat32, {6, 4}, std::nullopt})),
            at + "'raw_2d': the model has f32[4,6], the reader was asked for f32[6,4]");
  EXPECT_EQ(messageOf((*r)->read({"raw_2d", ir::DType::kFloat64, {4, 6}, std::nullopt})),
            at + "'raw_2d': the model has f32[4,6], the reader was asked for f64[4,6]");
  EXPECT_EQ(messageOf((*r)->read({"raw_2d", ir::DType::kFloat32, {4, 6}, WeightSlice{2, 0, 1, 1}})),
            at + "'raw_2d': slice of axis 2 [0, 1): the axis is out of range for f32[4,6]");
  EXPECT_EQ(messageOf((*r)->read({"raw_2d", ir::DType::kFloat32, {4, 6}, WeightSlice{0, 3, 2, 1}})),
            at + "'raw_2d': slice of axis 0 [3, 5): outside the 4 elements of axis 0 of f32[4,6]");
  EXPECT_EQ(
      messageOf((*r)->read({"raw_qkv", ir::DType::kFloat32, {4, 12}, WeightSlice{1, 2, 3, 3}})),
      at + "'raw_qkv': slice of axis 1 [2, 5) of 3 blocks: outside the 4 elements of each block "
           "of axis 1 of f32[4,12]");
  EXPECT_EQ(
      messageOf((*r)->read({"raw_qkv", ir::DType::kFloat32, {4, 12}, WeightSlice{1, 0, 1, 5}})),
      at + "'raw_qkv': slice of axis 1 [0, 1) of 5 blocks: axis 1 of size 12 does not divide "
           "into 5 blocks");
  std::string small(8, '\0');
  EXPECT_EQ(messageOf((*r)->readInto({"raw_2d", ir::DType::kFloat32, {4, 6}, std::nullopt},
                                     small.data(), small.size())),
            at + "'raw_2d': the destination holds 8 bytes, the requested part 96");
}

TEST(WeightReader, ExternalDataErrorsAreTheImportersAndNameTheFile) {
  TempDir dir;
  dir.file("outside.bin", std::string(96, '\0'));
  dir.file("m/short.bin", std::string(40, '\0'));
  dir.file("m/w.bin", std::string(200, '\0'));
  const std::vector<int64_t> dims{4, 6};
  std::vector<onnx::TensorProto> inits = {
      externalTensor("escape", dims, "../outside.bin", 0),
      externalTensor("absolute", dims, (dir.path() / "outside.bin").string(), 0),
      externalTensor("short", dims, "short.bin", 0),
      externalTensor("missing", dims, "missing.bin", 0),
      externalTensor("a", dims, "w.bin", 0),
      externalTensor("b", dims, "w.bin", 96)};
  const std::string path = dir.file("m/model.onnx", modelWith(inits).SerializeAsString());
  auto r = WeightReader::open(path);
  ASSERT_TRUE(r) << messageOf(r); // opening checks no external data
  auto err = [&](const std::string &name) {
    return messageOf((*r)->read({name, ir::DType::kFloat32, dims, WeightSlice{0, 1, 1, 1}}));
  };
  const std::string base = fs::weakly_canonical(dir.path() / "m").string();
  EXPECT_EQ(err("escape"), path +
                               ": tensor 'escape': external data location '../outside.bin' "
                               "resolves to '" +
                               fs::weakly_canonical(dir.path() / "outside.bin").string() +
                               "', outside the model's folder '" + base +
                               "' (through '..' or a symbolic link)");
  EXPECT_EQ(err("absolute"), path + ": tensor 'absolute': external data location '" +
                                 (dir.path() / "outside.bin").string() +
                                 "' is an absolute path; it must be relative to the model's "
                                 "folder");
  EXPECT_EQ(err("short"), path + ": tensor 'short': external data offset 0 + length 96 is past "
                                 "the end of 'short.bin' (40 bytes)");
  EXPECT_EQ(err("missing"), path +
                                ": tensor 'missing': external data file 'missing.bin' does "
                                "not exist (looked for '" +
                                base + "/missing.bin')");
  // A file cut short after the reader checked it: the read names the file and the tensor.
  EXPECT_EQ(err("a"), "");
  fs::resize_file(dir.path() / "m/w.bin", 150);
  EXPECT_EQ(err("b"), ""); // row 1 of b, bytes [120, 144), is still there
  EXPECT_EQ(messageOf((*r)->read({"b", ir::DType::kFloat32, dims, std::nullopt})),
            path + ": initializer 'b': external data file 'w.bin' ('" + base +
                "/w.bin') ends at byte 150, before the tensor's bytes [96, 192): it is "
                "truncated");
}

TEST(WeightReader, BadModelFilesAreTheImportersErrors) {
  TempDir dir;
  EXPECT_EQ(messageOf(WeightReader::open((dir.path() / "none.onnx").string()))
                .find((dir.path() / "none.onnx").string() + ": "),
            0u);
  onnx::TensorProto a = rawTensor("w", {2});
  const std::string dup = dir.file("dup.onnx", modelWith({a, a}).SerializeAsString());
  EXPECT_EQ(messageOf(WeightReader::open(dup)),
            dup + ": tensor 'w': two initializers have this name");
  onnx::TensorProto bad = rawTensor("w", {3});
  bad.mutable_raw_data()->resize(8);
  auto r = WeightReader::open(dir.file("bad.onnx", modelWith({bad}).SerializeAsString()));
  ASSERT_TRUE(r) << messageOf(r);
  EXPECT_EQ(messageOf((*r)->read({"w", ir::DType::kFloat32, {3}, std::nullopt})),
            (dir.path() / "bad.onnx").string() +
                ": tensor 'w': raw_data has 8 bytes, but f32[3] needs 12");
}

} // namespace
} // namespace dtc::rt
