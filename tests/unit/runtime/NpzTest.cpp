// Unit tests of runtime/io: .npy parsing (byte-exact files written by numpy 2.4, every malformed
// header case), .npy serialization (byte-identical to numpy), and .npz reading/writing through
// libzip (numpy-written stored and deflated archives, bad members, corrupt zips, atomic writes).
#include "runtime/io/Npy.h"
#include "runtime/io/NpzInternal.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace dtc::rt {
namespace {

using ir::DType;

// np.save(f, (np.arange(6, dtype='<f4').reshape(2, 3) * 0.5 - 1))
const std::string kNumpyF32(
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }       "
    "                                                   \x0a\x00\x00\x80\xbf\x00\x00\x00\xbf\x00"
    "\x00\x00\x00\x00\x00\x00\x3f\x00\x00\x80\x3f\x00\x00\xc0\x3f",
    152);
// np.save(f, np.array([True, False, True]))
const std::string kNumpyBool(
    "\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }         "
    "                                                   \x0a\x01\x00\x01",
    131);
// np.save(f, np.array([[-1, 2**40]], dtype='<i8'))
const std::string kNumpyI64(
    "\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (1, 2), }       "
    "                                                   \x0a\xff\xff\xff\xff\xff\xff\xff\xff\x00"
    "\x00\x00\x00\x00\x01\x00\x00",
    144);

// Archives written by numpy.savez / savez_compressed / zipfile (Python 3.11, numpy 2.4):
// savez(f, x=np.arange(4, dtype='<f4'), mask=np.array([True, False])) and the same compressed.
const std::string kSavezHex =
    "504b03042d000000000000002100523313fbffffffffffffffff05001400782e6e7079010010009000000000"
    "0000009000000000000000934e554d5059010076007b276465736372273a20273c6634272c2027666f727472"
    "616e5f6f72646572273a2046616c73652c20277368617065273a2028342c292c207d20202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "2020202020200a000000000000803f0000004000004040504b03042d000000000000002100ee19bb5dffffff"
    "ffffffffff080014006d61736b2e6e70790100100082000000000000008200000000000000934e554d505901"
    "0076007b276465736372273a20277c6231272c2027666f727472616e5f6f72646572273a2046616c73652c20"
    "277368617065273a2028322c292c207d20202020202020202020202020202020202020202020202020202020"
    "20202020202020202020202020202020202020202020202020202020202020200a0100504b01022d032d0000"
    "00000000002100523313fb9000000090000000050000000000000000000000800100000000782e6e7079504b"
    "01022d032d000000000000002100ee19bb5d82000000820000000800000000000000000000008001c7000000"
    "6d61736b2e6e7079504b0506000000000200020069000000830100000000";
const std::string kSavezCompressedHex =
    "504b03042d000000080000002100523313fbffffffffffffffff05001400782e6e7079010010009000000000"
    "0000004e000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a09e965f5452"
    "9498179f5f94920a12774bcc294e058a17672416a402f91a263a9a3a0ab50a14002e063068b007120e40e400"
    "00504b03042d000000080000002100ee19bb5dffffffffffffffff080014006d61736b2e6e70790100100082"
    "0000000000000046000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a05e9364a8aea3a09e"
    "965f54529498179f5f94920a12774bcc294e058a17672416a402f91a463a9a3a0ab50a14002e460600504b01"
    "022d032d000000080000002100523313fb4e0000009000000005000000000000000000000080010000000078"
    "2e6e7079504b01022d032d000000080000002100ee19bb5d4600000082000000080000000000000000000000"
    "8001850000006d61736b2e6e7079504b0506000000000200020069000000050100000000";
// zipfile: 'a.npy' (np.array([1, 2], dtype='<i4')) and 'readme.txt'.
const std::string kNonNpyMemberZipHex =
    "504b03041400000000001d597e5d0bf9aa2d880000008800000005000000612e6e7079934e554d5059010076"
    "007b276465736372273a20273c6934272c2027666f727472616e5f6f72646572273a2046616c73652c202773"
    "68617065273a2028322c292c207d202020202020202020202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020200a0100000002000000504b030414"
    "00000000001d597e5d86a6103605000000050000000a000000726561646d652e74787468656c6c6f504b0102"
    "14031400000000001d597e5d0bf9aa2d8800000088000000050000000000000000000000800100000000612e"
    "6e7079504b010214031400000000001d597e5d86a6103605000000050000000a000000000000000000000080"
    "01ab000000726561646d652e747874504b050600000000020002006b000000d80000000000";
// zipfile: 'a.npy' twice.
const std::string kDuplicateZipHex =
    "504b03041400000000001d597e5d0bf9aa2d880000008800000005000000612e6e7079934e554d5059010076"
    "007b276465736372273a20273c6934272c2027666f727472616e5f6f72646572273a2046616c73652c202773"
    "68617065273a2028322c292c207d202020202020202020202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020200a0100000002000000504b030414"
    "00000000001d597e5d0bf9aa2d880000008800000005000000612e6e7079934e554d5059010076007b276465"
    "736372273a20273c6934272c2027666f727472616e5f6f72646572273a2046616c73652c2027736861706527"
    "3a2028322c292c207d2020202020202020202020202020202020202020202020202020202020202020202020"
    "202020202020202020202020202020202020202020202020200a0100000002000000504b0102140314000000"
    "00001d597e5d0bf9aa2d8800000088000000050000000000000000000000800100000000612e6e7079504b01"
    "0214031400000000001d597e5d0bf9aa2d88000000880000000500000000000000000000008001ab00000061"
    "2e6e7079504b0506000000000200020066000000560100000000";
// zipfile: 'x.npy' holding the .npy above minus its last byte.
const std::string kShortMemberZipHex =
    "504b03041400000000001d597e5dd9f67ca7870000008700000005000000782e6e7079934e554d5059010076"
    "007b276465736372273a20273c6934272c2027666f727472616e5f6f72646572273a2046616c73652c202773"
    "68617065273a2028322c292c207d202020202020202020202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020200a01000000020000504b01021403"
    "1400000000001d597e5dd9f67ca78700000087000000050000000000000000000000800100000000782e6e70"
    "79504b0506000000000100010033000000aa0000000000";

std::string fromHex(const std::string &hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

template <typename T> std::string rawBytes(const std::vector<T> &values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty())
    std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T> std::vector<T> valuesOf(const HostArray &a) {
  std::vector<T> out(a.bytes.size() / sizeof(T));
  if (!out.empty())
    std::memcpy(out.data(), a.bytes.data(), a.bytes.size());
  return out;
}

HostArray makeArray(const std::string &name, DType dtype, std::vector<int64_t> shape,
                    std::string bytes) {
  HostArray a;
  a.name = name;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.bytes = std::move(bytes);
  return a;
}

/// A version 1.0 .npy file with the given header dict text (padded like numpy) and data.
std::string npyWithHeader(const std::string &dict, const std::string &data) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

std::string headerFor(const std::string &descr, const std::string &shape,
                      const std::string &fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

/// The error message of parsing `bytes` as "t.npy"; empty when it parsed.
std::string parseError(const std::string &bytes) {
  auto r = parseNpy(bytes, "t.npy");
  return r ? std::string() : r.status().message();
}

/// A fresh temporary folder, removed with its contents at the end of the test.
class TempDir {
public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dtc-npz-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string &name) const { return path_ + "/" + name; }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// ---- .npy files written by numpy ----

TEST(NpyTest, ParsesNumpyFloat32Matrix) {
  auto a = parseNpy(kNumpyF32, "f.npy");
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_EQ(a->dtype, DType::kFloat32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->numElements(), 6);
  EXPECT_EQ(valuesOf<float>(*a), (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f}));
  EXPECT_EQ(serializeNpy(*a), kNumpyF32); // byte-identical to np.save
}

TEST(NpyTest, ParsesNumpyBool) {
  auto a = parseNpy(kNumpyBool, "b.npy");
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_EQ(a->dtype, DType::kBool);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(a->bytes, std::string("\x01\x00\x01", 3));
  EXPECT_EQ(serializeNpy(*a), kNumpyBool);
}

TEST(NpyTest, ParsesNumpyInt64) {
  auto a = parseNpy(kNumpyI64, "i.npy");
  ASSERT_TRUE(a) << a.status().message();
  EXPECT_EQ(a->dtype, DType::kInt64);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(valuesOf<int64_t>(*a), (std::vector<int64_t>{-1, int64_t{1} << 40}));
  EXPECT_EQ(serializeNpy(*a), kNumpyI64);
}

// ---- serialization round trips ----

TEST(NpyTest, RoundTripsEveryDType) {
  const std::vector<std::pair<DType, std::string>> cases = {
      {DType::kFloat16, "<f2"}, {DType::kFloat32, "<f4"}, {DType::kFloat64, "<f8"},
      {DType::kInt8, "|i1"},    {DType::kInt16, "<i2"},   {DType::kInt32, "<i4"},
      {DType::kInt64, "<i8"},   {DType::kUInt8, "|u1"},   {DType::kUInt16, "<u2"},
      {DType::kUInt32, "<u4"},  {DType::kUInt64, "<u8"},  {DType::kBool, "|b1"}};
  for (const auto &[dtype, descr] : cases) {
    std::string bytes;
    for (int64_t i = 0; i < 6 * ir::dtypeSize(dtype); ++i)
      bytes += static_cast<char>(dtype == DType::kBool ? i % 2 : i * 7 + 1);
    HostArray in = makeArray("a", dtype, {2, 3}, bytes);
    std::string file = serializeNpy(in);
    EXPECT_EQ(file.size() % 64, bytes.size() % 64) << descr; // header padded to 64 bytes
    EXPECT_NE(file.find("'descr': '" + descr + "'"), std::string::npos) << descr;
    auto out = parseNpy(file, "rt.npy");
    ASSERT_TRUE(out) << descr << ": " << out.status().message();
    EXPECT_EQ(out->dtype, dtype) << descr;
    EXPECT_EQ(out->shape, in.shape) << descr;
    EXPECT_EQ(out->bytes, bytes) << descr;
  }
}

TEST(NpyTest, RoundTripsScalar) {
  HostArray in = makeArray("s", DType::kFloat64, {}, rawBytes<double>({3.5}));
  EXPECT_EQ(in.numElements(), 1);
  std::string file = serializeNpy(in);
  EXPECT_NE(file.find("'shape': (), }"), std::string::npos);
  auto out = parseNpy(file, "s.npy");
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_TRUE(out->shape.empty());
  EXPECT_EQ(valuesOf<double>(*out), std::vector<double>{3.5});
}

TEST(NpyTest, RoundTripsEmptyArray) {
  HostArray in = makeArray("e", DType::kFloat32, {0, 3}, "");
  EXPECT_EQ(in.numElements(), 0);
  std::string file = serializeNpy(in);
  EXPECT_NE(file.find("'shape': (0, 3), }"), std::string::npos);
  auto out = parseNpy(file, "e.npy");
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(out->shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(out->bytes.empty());
  EXPECT_EQ(parseError(file + "x"),
            "t.npy: data is 1 bytes, but shape (0, 3) of '<f4' needs 0 bytes");
}

TEST(NpyTest, RoundTrips1D) {
  HostArray in = makeArray("v", DType::kInt32, {5}, rawBytes<int32_t>({1, -2, 3, -4, 5}));
  std::string file = serializeNpy(in);
  EXPECT_NE(file.find("'shape': (5,), }"), std::string::npos);
  auto out = parseNpy(file, "v.npy");
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(out->shape, std::vector<int64_t>{5});
  EXPECT_EQ(valuesOf<int32_t>(*out), (std::vector<int32_t>{1, -2, 3, -4, 5}));
}

TEST(NpyTest, NumElementsReportsOverflowAsMinusOne) {
  HostArray a = makeArray("x", DType::kFloat32, {int64_t{1} << 62, 8}, "");
  EXPECT_EQ(a.numElements(), -1);
  a.shape = {-1, 2};
  EXPECT_EQ(a.numElements(), -1);
}

TEST(NpyTest, ParsesVersions2And3) {
  // Re-wrap the numpy v1 header with a 4-byte length, as format versions 2.0 and 3.0 do.
  std::string header = kNumpyF32.substr(10, 118);
  for (char major : {'\x02', '\x03'}) {
    std::string file = std::string("\x93NUMPY", 6) + major + '\0';
    file += static_cast<char>(header.size());
    file += std::string(3, '\0');
    file += header + kNumpyF32.substr(128);
    auto a = parseNpy(file, "v.npy");
    ASSERT_TRUE(a) << a.status().message();
    EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(valuesOf<float>(*a)[5], 1.5f);
  }
}

TEST(NpyTest, AcceptsFlexibleHeaderForms) {
  std::string data = rawBytes<int16_t>({7, 8, 9});
  for (const std::string &dict :
       {std::string("{'shape': (3,), 'descr': '<i2', 'fortran_order': False}"),
        std::string("{ \"descr\" : \"=i2\" ,\t'fortran_order':False,'shape':( 3 , ) , }"),
        std::string("{'descr': '<i2', 'fortran_order': False, 'shape': (3L,), }"),
        std::string("{'fortran_order': False,\n 'shape': (3,),\n 'descr': '<i2'}")}) {
    auto a = parseNpy(npyWithHeader(dict, data), "t.npy");
    ASSERT_TRUE(a) << dict << ": " << a.status().message();
    EXPECT_EQ(a->dtype, DType::kInt16) << dict;
    EXPECT_EQ(valuesOf<int16_t>(*a), (std::vector<int16_t>{7, 8, 9})) << dict;
  }
  // One-byte types have no byte order: any mark is fine.
  auto u8 = parseNpy(npyWithHeader(headerFor(">u1", "(2,)"), "ab"), "t.npy");
  ASSERT_TRUE(u8) << u8.status().message();
  EXPECT_EQ(u8->dtype, DType::kUInt8);
}

// ---- malformed .npy files ----

TEST(NpyErrorTest, BadMagic) {
  EXPECT_EQ(parseError("PK\x03\x04 not npy at all"),
            "t.npy: bad magic: not a .npy file (expected \\x93NUMPY)");
  EXPECT_EQ(parseError(""), "t.npy: bad magic: not a .npy file (expected \\x93NUMPY)");
  std::string wrong = kNumpyF32;
  wrong[1] = 'n';
  EXPECT_NE(parseError(wrong).find("bad magic"), std::string::npos);
}

TEST(NpyErrorTest, Truncated) {
  EXPECT_EQ(parseError(kNumpyF32.substr(0, 7)),
            "t.npy: truncated: file ends inside the .npy preamble");
  EXPECT_EQ(parseError(kNumpyF32.substr(0, 9)),
            "t.npy: truncated: file ends inside the .npy preamble");
  EXPECT_EQ(parseError(kNumpyF32.substr(0, 60)),
            "t.npy: truncated: header needs 118 bytes, file has 50");
}

TEST(NpyErrorTest, UnsupportedVersion) {
  std::string file = kNumpyF32;
  file[6] = '\x04';
  EXPECT_EQ(parseError(file),
            "t.npy: unsupported .npy format version 4.0 (supported: 1.0, 2.0, 3.0)");
  file[6] = '\x01';
  file[7] = '\x01';
  EXPECT_NE(parseError(file).find("version 1.1"), std::string::npos);
}

TEST(NpyErrorTest, HeaderTooLong) {
  std::string file = std::string("\x93NUMPY\x02", 7) + '\0' + std::string("\xa0\x86\x01\x00", 4);
  file += std::string(100000, ' ');
  EXPECT_EQ(parseError(file), "t.npy: header length 100000 exceeds the limit of 65536 bytes");
}

TEST(NpyErrorTest, HeaderNotADict) {
  EXPECT_EQ(parseError(npyWithHeader("['<f4', False, (2,)]", "")),
            "t.npy: malformed header at byte 0: header is not a dict literal: expected '{'");
  EXPECT_NE(parseError(npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
                                     std::string(4, '\0')))
                .find("expected ',' or '}'"),
            std::string::npos);
  EXPECT_NE(parseError(npyWithHeader(headerFor("<f4", "(1,)") + " extra", std::string(4, '\0')))
                .find("unexpected text after the header dict"),
            std::string::npos);
  EXPECT_NE(parseError(npyWithHeader("{descr: '<f4'}", "")).find("expected a key"),
            std::string::npos);
}

TEST(NpyErrorTest, MissingAndDuplicateKeys) {
  EXPECT_EQ(parseError(npyWithHeader("{'descr': '<f4', 'fortran_order': False}", "")),
            "t.npy: header lacks the 'shape' key");
  EXPECT_EQ(parseError(npyWithHeader("{'fortran_order': False, 'shape': ()}", "")),
            "t.npy: header lacks the 'descr' key");
  EXPECT_EQ(parseError(npyWithHeader("{'descr': '<f4', 'shape': ()}", "")),
            "t.npy: header lacks the 'fortran_order' key");
  EXPECT_NE(parseError(npyWithHeader("{'descr': '<f4', 'descr': '<f4'}", ""))
                .find("duplicate key 'descr'"),
            std::string::npos);
  EXPECT_NE(
      parseError(npyWithHeader("{'descr': '<f4', 'order': 'C'}", "")).find("unknown key 'order'"),
      std::string::npos);
}

TEST(NpyErrorTest, BadShapeTuples) {
  auto errorFor = [](const std::string &shape) {
    return parseError(npyWithHeader(headerFor("<f4", shape), std::string(8, '\0')));
  };
  EXPECT_NE(errorFor("(3)").find("'shape' (n) is not a tuple"), std::string::npos);
  EXPECT_NE(errorFor("(,)").find("expected a dimension"), std::string::npos);
  EXPECT_NE(errorFor("(2 3)").find("expected ',' or ')' in 'shape'"), std::string::npos);
  EXPECT_NE(errorFor("[2, 1]").find("expected a tuple for 'shape'"), std::string::npos);
  EXPECT_NE(errorFor("(2, x)").find("expected a dimension"), std::string::npos);
  EXPECT_NE(errorFor("(02,)").find("leading zero"), std::string::npos);
  EXPECT_NE(errorFor("(2,").find("expected a dimension"), std::string::npos);
  EXPECT_NE(errorFor("(1.5,)").find("expected ',' or ')'"), std::string::npos);
}

TEST(NpyErrorTest, NegativeDimension) {
  std::string err = parseError(npyWithHeader(headerFor("<f4", "(2, -1)"), ""));
  EXPECT_EQ(err.rfind("t.npy: malformed header at byte ", 0), 0u) << err;
  EXPECT_NE(err.find("negative dimension in 'shape'"), std::string::npos) << err;
}

TEST(NpyErrorTest, OverflowingShapes) {
  EXPECT_EQ(parseError(npyWithHeader(headerFor("<f4", "(4611686018427387904, 8)"), "")),
            "t.npy: shape (4611686018427387904, 8) is too large: its byte size overflows");
  // The element count fits int64, the byte count does not.
  EXPECT_EQ(parseError(npyWithHeader(headerFor("<f8", "(2305843009213693952,)"), "")),
            "t.npy: shape (2305843009213693952,) is too large: its byte size overflows");
  EXPECT_NE(parseError(npyWithHeader(headerFor("<f4", "(99999999999999999999,)"), ""))
                .find("does not fit in 64 bits"),
            std::string::npos);
}

TEST(NpyErrorTest, RankLimit) {
  std::string shape = "(";
  for (int i = 0; i < 65; ++i)
    shape += "1, ";
  shape += ")";
  EXPECT_NE(parseError(npyWithHeader(headerFor("<f4", shape), std::string(4, '\0')))
                .find("more than 64 dimensions"),
            std::string::npos);
}

TEST(NpyErrorTest, DataLengthMismatch) {
  EXPECT_EQ(parseError(kNumpyF32.substr(0, kNumpyF32.size() - 1)),
            "t.npy: data is 23 bytes, but shape (2, 3) of '<f4' needs 24 bytes");
  EXPECT_EQ(parseError(kNumpyF32 + "\x01\x02"),
            "t.npy: data is 26 bytes, but shape (2, 3) of '<f4' needs 24 bytes");
  EXPECT_EQ(parseError(kNumpyBool.substr(0, 128)),
            "t.npy: data is 0 bytes, but shape (3,) of '|b1' needs 3 bytes");
}

TEST(NpyErrorTest, FortranOrder) {
  EXPECT_EQ(parseError(npyWithHeader(headerFor("<f4", "(2, 2)", "True"), std::string(16, '\0'))),
            "t.npy: Fortran-order arrays are not supported (fortran_order: True); save "
            "np.ascontiguousarray(arr) instead");
  EXPECT_NE(parseError(npyWithHeader(headerFor("<f4", "(1,)", "1"), std::string(4, '\0')))
                .find("expected True or False"),
            std::string::npos);
}

TEST(NpyErrorTest, BigEndian) {
  EXPECT_EQ(parseError(npyWithHeader(headerFor(">f4", "(1,)"), std::string(4, '\0'))),
            "t.npy: big-endian dtype '>f4' is not supported; convert with arr.astype('<f4')");
  EXPECT_NE(parseError(npyWithHeader(headerFor(">i8", "(1,)"), std::string(8, '\0')))
                .find("big-endian dtype '>i8'"),
            std::string::npos);
}

TEST(NpyErrorTest, UnsupportedDescrs) {
  auto errorFor = [](const std::string &descr) {
    return parseError(npyWithHeader(headerFor(descr, "(1,)"), std::string(8, '\0')));
  };
  EXPECT_EQ(errorFor("<c8"), "t.npy: unsupported dtype '<c8' (complex numbers); supported: <f2 "
                             "<f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1");
  EXPECT_NE(errorFor("|O").find("unsupported dtype '|O' (Python objects)"), std::string::npos);
  EXPECT_NE(errorFor("<U2").find("(unicode strings)"), std::string::npos);
  EXPECT_NE(errorFor("|S8").find("(byte strings)"), std::string::npos);
  EXPECT_NE(errorFor("<M8[s]").find("(datetimes)"), std::string::npos);
  EXPECT_NE(errorFor("f4").find("unsupported dtype 'f4'"), std::string::npos);
  EXPECT_NE(errorFor("|f4").find("has no byte order"), std::string::npos);
  EXPECT_NE(
      parseError(npyWithHeader("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}",
                               std::string(4, '\0')))
          .find("structured (record) dtypes are not supported"),
      std::string::npos);
}

// ---- .npz archives ----

TEST(NpzTest, ReadsNumpySavez) {
  TempDir dir;
  std::string path = dir.file("stored.npz");
  writeFile(path, fromHex(kSavezHex));
  auto arrays = readArrays(path);
  ASSERT_TRUE(arrays) << arrays.status().message();
  ASSERT_EQ(arrays->size(), 2u);
  EXPECT_EQ((*arrays)[0].name, "x");
  EXPECT_EQ((*arrays)[0].dtype, DType::kFloat32);
  EXPECT_EQ((*arrays)[0].shape, std::vector<int64_t>{4});
  EXPECT_EQ(valuesOf<float>((*arrays)[0]), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ((*arrays)[1].name, "mask");
  EXPECT_EQ((*arrays)[1].dtype, DType::kBool);
  EXPECT_EQ((*arrays)[1].bytes, std::string("\x01\x00", 2));
}

TEST(NpzTest, ReadsNumpySavezCompressed) {
  TempDir dir;
  std::string path = dir.file("deflated.npz");
  writeFile(path, fromHex(kSavezCompressedHex));
  auto arrays = readArrays(path);
  ASSERT_TRUE(arrays) << arrays.status().message();
  ASSERT_EQ(arrays->size(), 2u);
  EXPECT_EQ((*arrays)[0].name, "x");
  EXPECT_EQ(valuesOf<float>((*arrays)[0]), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ((*arrays)[1].name, "mask");
  EXPECT_EQ((*arrays)[1].shape, std::vector<int64_t>{2});
  // The in-memory reader agrees.
  auto mem = readNpzFromMemory(fromHex(kSavezCompressedHex), "mem");
  ASSERT_TRUE(mem) << mem.status().message();
  ASSERT_EQ(mem->size(), 2u);
  EXPECT_EQ((*mem)[0].bytes, (*arrays)[0].bytes);
  EXPECT_EQ((*mem)[1].bytes, (*arrays)[1].bytes);
}

TEST(NpzTest, WriteThenReadEveryDType) {
  TempDir dir;
  std::string path = dir.file("all.npz");
  std::vector<HostArray> arrays = {
      makeArray("f16", DType::kFloat16, {2}, rawBytes<uint16_t>({0x3c00, 0xc000})),
      makeArray("f32", DType::kFloat32, {2, 2}, rawBytes<float>({1, 2, 3, 4})),
      makeArray("f64", DType::kFloat64, {}, rawBytes<double>({-0.25})),
      makeArray("i8", DType::kInt8, {3}, rawBytes<int8_t>({-1, 0, 1})),
      makeArray("i16", DType::kInt16, {1}, rawBytes<int16_t>({-300})),
      makeArray("i32", DType::kInt32, {0, 3}, ""),
      makeArray("i64", DType::kInt64, {1, 1, 1}, rawBytes<int64_t>({int64_t{1} << 50})),
      makeArray("u8", DType::kUInt8, {2}, rawBytes<uint8_t>({0, 255})),
      makeArray("u16", DType::kUInt16, {1}, rawBytes<uint16_t>({65535})),
      makeArray("u32", DType::kUInt32, {1}, rawBytes<uint32_t>({4000000000u})),
      makeArray("u64", DType::kUInt64, {1}, rawBytes<uint64_t>({~uint64_t{0}})),
      makeArray("flag", DType::kBool, {2}, std::string("\x01\x00", 2)),
      makeArray("dir/nested name", DType::kFloat32, {1}, rawBytes<float>({7})),
  };
  Status st = writeNpz(path, arrays);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto back = readArrays(path);
  ASSERT_TRUE(back) << back.status().message();
  ASSERT_EQ(back->size(), arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ((*back)[i].name, arrays[i].name);
    EXPECT_EQ((*back)[i].dtype, arrays[i].dtype) << arrays[i].name;
    EXPECT_EQ((*back)[i].shape, arrays[i].shape) << arrays[i].name;
    EXPECT_EQ((*back)[i].bytes, arrays[i].bytes) << arrays[i].name;
  }
  // Members are stored (like np.savez): each .npy appears verbatim in the file.
  std::string file = readFile(path);
  EXPECT_NE(file.find(serializeNpy(arrays[1])), std::string::npos);
}

TEST(NpzTest, WriteReplacesExistingFileAtomically) {
  TempDir dir;
  std::string path = dir.file("out.npz");
  writeFile(path, "old contents");
  ASSERT_TRUE(writeNpz(path, {makeArray("y", DType::kInt32, {1}, rawBytes<int32_t>({42}))}));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto back = readArrays(path);
  ASSERT_TRUE(back) << back.status().message();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ(valuesOf<int32_t>((*back)[0]), std::vector<int32_t>{42});
}

TEST(NpzTest, WritesEmptyArchive) {
  TempDir dir;
  std::string path = dir.file("empty.npz");
  Status st = writeNpz(path, {});
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(std::filesystem::file_size(path), 22u);
  auto back = readArrays(path);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_TRUE(back->empty());
}

TEST(NpzTest, WriteRejectsInvalidArrays) {
  TempDir dir;
  std::string path = dir.file("bad.npz");
  EXPECT_EQ(writeNpz(path, {makeArray("a", DType::kFloat32, {2}, "abc")}).message(),
            path + ": array 'a': holds 3 bytes, its shape needs 8");
  EXPECT_EQ(writeNpz(path, {makeArray("a", DType::kInt8, {1}, "x"),
                            makeArray("a", DType::kInt8, {1}, "y")})
                .message(),
            path + ": duplicate array 'a'");
  EXPECT_EQ(writeNpz(path, {makeArray("", DType::kInt8, {1}, "x")}).message(),
            path + ": an array has an empty name");
  EXPECT_EQ(writeNpz(path, {makeArray("b", DType::kBFloat16, {1}, "xy")}).message(),
            path + ": array 'b': dtype bf16 has no NumPy equivalent");
  EXPECT_NE(writeNpz(path, {makeArray("n", DType::kInt8, {-1}, "")}).message().find("negative"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
  std::string missingDir = dir.file("no/such/dir/out.npz");
  Status st = writeNpz(missingDir, {makeArray("a", DType::kInt8, {1}, "x")});
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.message().rfind(missingDir + ": cannot create " + missingDir + ".tmp.", 0), 0u)
      << st.message();
}

// writeNpz writes through an AtomicFile: a fresh O_CREAT|O_EXCL|O_NOFOLLOW temporary with a
// random suffix, synced and renamed. A file or symlink planted at the old fixed name
// "<path>.tmp" is neither followed nor touched, and no temporary is left behind.
TEST(NpzTest, WriteUsesAFreshTemporaryNeverAPlantedOne) {
  TempDir dir;
  const std::string path = dir.file("out.npz"), victim = dir.file("victim");
  writeFile(victim, "precious");
  std::filesystem::create_symlink(victim, path + ".tmp");
  ASSERT_TRUE(writeNpz(path, {makeArray("y", DType::kInt32, {2}, rawBytes<int32_t>({4, 2}))}));
  EXPECT_EQ(readFile(victim), "precious");
  EXPECT_TRUE(std::filesystem::is_symlink(path + ".tmp"));
  auto back = readArrays(path);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(valuesOf<int32_t>((*back)[0]), (std::vector<int32_t>{4, 2}));
  int entries = 0;
  for (const auto &e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 3); // out.npz, out.npz.tmp (the planted link), victim
  // An existing FIFO (or device) is refused, never replaced.
  const std::string fifo = dir.file("pipe.npz");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Status st = writeNpz(fifo, {makeArray("y", DType::kInt32, {1}, rawBytes<int32_t>({1}))});
  ASSERT_FALSE(st.isOk());
  struct stat sb {};
  ASSERT_EQ(::lstat(fifo.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISFIFO(sb.st_mode));
}

TEST(NpzTest, MissingFile) {
  TempDir dir;
  std::string path = dir.file("nope.npz");
  auto r = readArrays(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), path + ": cannot open: No such file or directory");
  auto d = readArrays(dir.path());
  ASSERT_FALSE(d);
  EXPECT_EQ(d.status().message(),
            dir.path() + ": cannot open: not a regular file (a FIFO, device or folder)");
  // A FIFO is refused at once (opening it used to wait for a writer forever).
  std::string fifo = dir.file("data.npz");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = readArrays(fifo);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().message(),
            fifo + ": cannot open: not a regular file (a FIFO, device or folder)");
}

TEST(NpzTest, FilterSeesHeadersBeforeDataIsRead) {
  TempDir dir;
  std::string path = dir.file("f.npz");
  HostArray a = makeArray("a", DType::kFloat32, {2, 3}, std::string(24, '\1'));
  HostArray b = makeArray("b", DType::kInt64, {4}, std::string(32, '\2'));
  ASSERT_TRUE(writeNpz(path, {a, b}).isOk());
  std::vector<std::string> seen;
  auto r = readArrays(path,
                      [&](const std::string &name, DType dtype,
                          const std::vector<int64_t> &shape) -> Expected<bool> {
                        seen.push_back(name + ":" + dtc::ir::dtypeName(dtype) + ":" +
                                       std::to_string(shape.size()));
                        return name == "b";
                      });
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "b");
  EXPECT_EQ((*r)[0].bytes, b.bytes);
  EXPECT_EQ(seen, (std::vector<std::string>{"a:f32:2", "b:i64:1"}));
  auto e = readArrays(
      path, [&](const std::string &name, DType, const std::vector<int64_t> &) -> Expected<bool> {
        return Status::error(path + ": array '" + name + "'", "not wanted");
      });
  ASSERT_FALSE(e);
  EXPECT_EQ(e.status().message(), path + ": array 'a': not wanted");
}

TEST(NpzTest, ReadsPlainNpyFileNamedAfterStem) {
  TempDir dir;
  std::string path = dir.file("weights.v2.npy");
  writeFile(path, kNumpyI64);
  auto r = readArrays(path);
  ASSERT_TRUE(r) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "weights.v2");
  EXPECT_EQ(valuesOf<int64_t>((*r)[0])[1], int64_t{1} << 40);
  // Sniffed by magic even without the extension.
  std::string noExt = dir.file("labels");
  writeFile(noExt, kNumpyBool);
  auto b = readArrays(noExt);
  ASSERT_TRUE(b) << b.status().message();
  EXPECT_EQ((*b)[0].name, "labels");
  EXPECT_EQ((*b)[0].dtype, DType::kBool);
  // A .npy file's errors name the file.
  std::string bad = dir.file("bad.npy");
  writeFile(bad, kNumpyF32.substr(0, 140));
  auto e = readArrays(bad);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.status().message(),
            bad + ": data is 12 bytes, but shape (2, 3) of '<f4' needs 24 bytes");
}

TEST(NpzTest, RejectsNonNpyMember) {
  auto r = readNpzFromMemory(fromHex(kNonNpyMemberZipHex), "in.npz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "in.npz: member 'readme.txt' is not a .npy array (an .npz holds only .npy files)");
}

TEST(NpzTest, RejectsDuplicateMembers) {
  auto r = readNpzFromMemory(fromHex(kDuplicateZipHex), "in.npz");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message().rfind("in.npz: ", 0), 0u) << r.status().message();
  EXPECT_EQ(r.status().message(),
            "in.npz: not a readable .npz (zip) file: duplicate member names in the zip archive");
}

TEST(NpzTest, BadMemberErrorNamesTheArray) {
  TempDir dir;
  std::string path = dir.file("short.npz");
  writeFile(path, fromHex(kShortMemberZipHex));
  auto r = readArrays(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            path + ": array 'x': data is 7 bytes, but shape (2,) of '<i4' needs 8 bytes");
}

TEST(NpzTest, CorruptZips) {
  std::string good = fromHex(kSavezHex);
  // Not a zip at all.
  auto garbage = readNpzFromMemory("PK\x03\x04 this is not a zip archive", "g.npz");
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.status().message().rfind("g.npz: not a readable .npz (zip) file: ", 0), 0u)
      << garbage.status().message();
  // Truncated: the central directory is gone.
  auto cut = readNpzFromMemory(good.substr(0, good.size() / 2), "c.npz");
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.status().message().rfind("c.npz: not a readable .npz (zip) file: ", 0), 0u)
      << cut.status().message();
  // A flipped data byte in the stored member 'x' fails its CRC.
  std::string flipped = good;
  size_t second = flipped.find("PK\x03\x04", 4);
  ASSERT_NE(second, std::string::npos);
  flipped[second - 1] ^= 0x40;
  auto crc = readNpzFromMemory(flipped, "f.npz");
  ASSERT_FALSE(crc);
  EXPECT_EQ(crc.status().message().rfind("f.npz: array 'x': cannot read member: ", 0), 0u)
      << crc.status().message();
  // A damaged deflate stream.
  std::string deflated = fromHex(kSavezCompressedHex);
  size_t header = deflated.find("x.npy");
  ASSERT_NE(header, std::string::npos);
  for (size_t i = header + 30; i < header + 40; ++i)
    deflated[i] = static_cast<char>(0xff);
  auto bad = readNpzFromMemory(deflated, "d.npz");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message().rfind("d.npz: array 'x': ", 0), 0u) << bad.status().message();
  // A zip file on disk that is not a zip.
  TempDir dir;
  std::string path = dir.file("junk.npz");
  writeFile(path, "definitely not a zip archive");
  auto disk = readArrays(path);
  ASSERT_FALSE(disk);
  EXPECT_EQ(disk.status().message().rfind(path + ": not a readable .npz (zip) file: ", 0), 0u)
      << disk.status().message();
}

} // namespace
} // namespace dtc::rt
