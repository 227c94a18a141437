// Model file reading: format sniffing, binary parsing streamed from the file (so a 2 GiB model
// is not held twice), ONNX text syntax through libonnx's OnnxParser, and a scan of the
// top-level protobuf fields that tells a truncated model from a file that is not a model.
#include "compiler/onnx/ModelFile.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/wire_format_lite.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace dtc::onnxio {

namespace fs = std::filesystem;
namespace pbio = google::protobuf::io;

namespace {

constexpr const char *kLfsHeader = "version https://git-lfs.github.com/spec/v1";
constexpr size_t kHeadSize = 4096;

/// Text: no control characters other than whitespace (binary ONNX starts with 0x08).
bool looksLikeText(const std::string &head) {
  for (unsigned char c : head)
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') || c == 0x7f)
      return false;
  return true;
}

/// Position of the first character that is not whitespace or in a '#' comment line.
size_t skipSpaceAndComments(const std::string &s, size_t i = 0) {
  for (;;) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
    if (i >= s.size() || s[i] != '#')
      return i;
    while (i < s.size() && s[i] != '\n')
      ++i;
  }
}

enum class TextKind { kOnnxText, kProtoText, kOther };

/// Classifies text content: ONNX text syntax starts with '<' (model header) or `name (`
/// (graph header); protobuf text format starts with `field:` or `field {`.
TextKind classifyText(const std::string &head, std::string *firstToken) {
  size_t i = skipSpaceAndComments(head);
  if (i < head.size() && head[i] == '<')
    return TextKind::kOnnxText;
  size_t start = i;
  while (i < head.size() &&
         (std::isalnum(static_cast<unsigned char>(head[i])) || head[i] == '_' || head[i] == '.'))
    ++i;
  *firstToken = head.substr(start, i - start);
  if (i == start)
    return TextKind::kOther;
  while (i < head.size() && (head[i] == ' ' || head[i] == '\t'))
    ++i;
  if (i < head.size() && (head[i] == ':' || head[i] == '{'))
    return TextKind::kProtoText;
  if (i < head.size() && head[i] == '(')
    return TextKind::kOnnxText;
  return TextKind::kOther;
}

std::string firstLine(const std::string &head) {
  size_t i = skipSpaceAndComments(head);
  size_t end = head.find('\n', i);
  std::string line = head.substr(i, end == std::string::npos ? std::string::npos : end - i);
  if (line.size() > 60)
    line = line.substr(0, 60) + "...";
  return line;
}

bool hasTextExtension(const std::string &path) {
  std::string ext = fs::path(path).extension().string();
  return ext == ".onnxtxt" || ext == ".onnxtext";
}

/// ModelProto's top-level fields: number -> (name, wire type).
bool modelField(uint32_t number, const char **name, int *wireType) {
  using WT = google::protobuf::internal::WireFormatLite;
  switch (number) {
  case 1:
    *name = "ir_version";
    *wireType = WT::WIRETYPE_VARINT;
    return true;
  case 2:
    *name = "producer_name";
    *wireType = WT::WIRETYPE_LENGTH_DELIMITED;
    return true;
  case 3:
    *name = "producer_version";
    *wireType = WT::WIRETYPE_LENGTH_DELIMITED;
    return true;
  case 4:
    *name = "domain";
    *wireType = WT::WIRETYPE_LENGTH_DELIMITED;
    return true;
  case 5:
    *name = "model_version";
    *wireType = WT::WIRETYPE_VARINT;
    return true;
  case 6:
    *name = "doc_string";
    *wireType = WT::WIRETYPE_LENGTH_DELIMITED;
    return true;
  case 7:
    *name = "graph";
    *wireType = WT::WIRETYPE_LENGTH_DELIMITED;
    return true;
  case 8:
    *name = "opset_import";
    *wireType = WT::WIRETYPE_LENGTH_DELIMITED;
    return true;
  case 14:
    *name = "metadata_props";
    *wireType = WT::WIRETYPE_LENGTH_DELIMITED;
    return true;
  case 20:
    *name = "training_info";
    *wireType = WT::WIRETYPE_LENGTH_DELIMITED;
    return true;
  case 25:
    *name = "functions";
    *wireType = WT::WIRETYPE_LENGTH_DELIMITED;
    return true;
  default:
    return false;
  }
}

/// Explains why binary parsing failed by walking the top-level fields: a field running past
/// the end of the file means truncation; a field ModelProto does not have means the file is
/// not a model; otherwise the damage is inside a nested message.
Status diagnoseBinary(const std::string &path, int64_t fileSize) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(path, "is not a valid ONNX model (protobuf parsing failed)");
  pbio::FileInputStream fis(fd);
  fis.SetCloseOnDelete(true);
  pbio::CodedInputStream cis(&fis);
  cis.SetTotalBytesLimit(INT_MAX);
  using WT = google::protobuf::internal::WireFormatLite;
  std::string notModel = "is not an ONNX model: protobuf parsing failed at byte ";
  std::string hint = " (random bytes, or another kind of file?)";
  for (;;) {
    int64_t pos = cis.CurrentPosition();
    uint32_t tag = cis.ReadTag();
    if (tag == 0)
      break;
    uint32_t number = tag >> 3;
    int wireType = static_cast<int>(tag & 7);
    const char *name = nullptr;
    int expected = -1;
    if (!modelField(number, &name, &expected) || expected != wireType)
      return Status::error(path, notModel + std::to_string(pos) + ": field " +
                                     std::to_string(number) + " (wire type " +
                                     std::to_string(wireType) +
                                     ") is not part of an ONNX ModelProto" + hint);
    if (wireType == WT::WIRETYPE_VARINT) {
      uint64_t v;
      if (!cis.ReadVarint64(&v))
        return Status::error(path, "is truncated: the file ends inside field '" +
                                       std::string(name) + "' at byte " + std::to_string(pos));
      continue;
    }
    uint32_t length = 0;
    if (!cis.ReadVarint32(&length))
      return Status::error(path, "is truncated: the file ends inside field '" + std::string(name) +
                                     "' at byte " + std::to_string(pos));
    int64_t remaining = fileSize - cis.CurrentPosition();
    if (static_cast<int64_t>(length) > remaining)
      return Status::error(path, "is truncated: field '" + std::string(name) + "' at byte " +
                                     std::to_string(pos) + " needs " + std::to_string(length) +
                                     " bytes but only " + std::to_string(remaining) +
                                     " remain in the file (" + std::to_string(fileSize) +
                                     " bytes); the download or copy was probably cut short");
    if (!cis.Skip(static_cast<int>(length)))
      return Status::error(path, "is truncated inside field '" + std::string(name) + "'");
  }
  if (cis.CurrentPosition() < fileSize)
    return Status::error(path, notModel + std::to_string(cis.CurrentPosition()) + hint);
  return Status::error(path, "is a corrupt ONNX model: protobuf parsing failed inside a "
                             "nested message (the file is damaged)");
}

Status parseBinary(const std::string &path, int64_t fileSize, onnx::ModelProto &model) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(path, std::string("cannot open: ") + std::strerror(errno));
  bool ok = false;
  {
    pbio::FileInputStream fis(fd);
    fis.SetCloseOnDelete(true);
    pbio::CodedInputStream cis(&fis);
    cis.SetTotalBytesLimit(INT_MAX);
    ok = model.ParseFromCodedStream(&cis) && cis.ConsumedEntireMessage();
  }
  if (ok)
    return Status::ok();
  model.Clear();
  return diagnoseBinary(path, fileSize);
}

/// "(line: L column: C)" (OnnxParser's position) -> "line L, column C".
std::string positionText(const std::string &pos) {
  int line = 0, column = 0;
  if (std::sscanf(pos.c_str(), "(line: %d column: %d)", &line, &column) == 2)
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  return pos;
}

} // namespace

Status parseModelText(const std::string &text, const std::string &displayName,
                      onnx::ModelProto &model) {
  if (text.find('\0') != std::string::npos)
    return Status::error(displayName, "contains NUL bytes; it is not ONNX text syntax");
  try {
    onnx::OnnxParser parser(text.c_str());
    onnx::Common::Status s = parser.Parse(model);
    if (!s.IsOK()) {
      // "[ParseError at position (line: L column: C)]\nError context: X\nmessage"
      std::string msg = s.ErrorMessage();
      std::string where, context, what = msg;
      size_t a = msg.find("(line: "), b = msg.find(")]\n");
      size_t c = msg.find("Error context: ");
      if (a != std::string::npos && b != std::string::npos && c != std::string::npos) {
        where = positionText(msg.substr(a));
        size_t ce = msg.find('\n', c);
        context = msg.substr(c + 15, ce == std::string::npos ? std::string::npos : ce - c - 15);
        what = ce == std::string::npos ? "" : msg.substr(ce + 1);
      }
      for (char &ch : what)
        if (ch == '\n')
          ch = ' ';
      std::string out = "ONNX text syntax error";
      if (!where.empty())
        out += " at " + where;
      out += ": " + what;
      if (!context.empty()) {
        // The context is the whole offending line, which may hold every weight value.
        if (context.size() > 120)
          context = context.substr(0, 117) + "...";
        out += " (near: " + context + ")";
      }
      // onnx >= 1.16's printer quotes names that are not identifiers ("net.0.weight");
      // libonnx 1.12's parser, which dtc uses, does not read quoted names.
      if (what.find("Identifier expected") != std::string::npos &&
          context.find('"') != std::string::npos)
        out += "; note: quoted names (as newer onnx printers write them) are not supported by "
               "this ONNX text parser: rename them to plain identifiers, or use the binary "
               ".onnx file";
      return Status::error(displayName, out);
    }
    if (!parser.EndOfInput())
      return Status::error(displayName, "ONNX text syntax error at " +
                                            positionText(parser.GetCurrentPos()) +
                                            ": unexpected text after the graph");
  } catch (const std::out_of_range &e) {
    // libonnx's parser converts numbers with std::stoll & co., which throw on overflow.
    return Status::error(displayName, std::string("ONNX text syntax error: a number does not "
                                                  "fit in its type (") +
                                          e.what() + " out of range)");
  } catch (const std::exception &e) {
    return Status::error(displayName, std::string("ONNX text syntax error: ") + e.what());
  } catch (...) {
    return Status::error(displayName, "ONNX text syntax error");
  }
  return Status::ok();
}

Status readModelFile(const std::string &path, onnx::ModelProto &model) {
  if (path.empty())
    return Status::error("<model>", "no model file given");
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      return Status::error(path, "cannot access: " + ec.message());
    return Status::error(path, "no such file");
  }
  if (fs::is_directory(st))
    return Status::error(path, "is a directory, not an ONNX model file");
  if (!fs::is_regular_file(st))
    return Status::error(path, "is not a regular file");
  uintmax_t size = fs::file_size(path, ec);
  if (ec)
    return Status::error(path, "cannot get the file size: " + ec.message());
  if (size == 0)
    return Status::error(path, "is empty (0 bytes); expected an ONNX model (.onnx binary or "
                               ".onnxtxt text)");
  if (size > static_cast<uintmax_t>(INT_MAX))
    return Status::error(path, "is " + std::to_string(size) +
                                   " bytes; an ONNX protobuf file is limited to 2 GiB (store "
                                   "the weights as external data)");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(path, std::string("cannot open: ") + std::strerror(errno));
  std::string head(std::min<uintmax_t>(size, kHeadSize), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (!in)
    return Status::error(path, "read failed");

  if (head.rfind(kLfsHeader, 0) == 0)
    return Status::error(path, "is a Git LFS pointer file, not the model itself; fetch the "
                               "model with `git lfs pull`");

  bool textExt = hasTextExtension(path);
  if (textExt || looksLikeText(head)) {
    std::string token;
    TextKind kind = classifyText(head, &token);
    if (kind == TextKind::kProtoText)
      return Status::error(path, "looks like protobuf text format (prototxt, starts with '" +
                                     token +
                                     "'), not an ONNX model; convert it to binary .onnx "
                                     "(python: onnx.save(google.protobuf.text_format.Parse(text, "
                                     "onnx.ModelProto()), 'model.onnx')) or write ONNX text "
                                     "syntax");
    if (textExt || kind == TextKind::kOnnxText) {
      std::string text(static_cast<size_t>(size), '\0');
      in.seekg(0);
      in.read(text.data(), static_cast<std::streamsize>(text.size()));
      if (!in)
        return Status::error(path, "read failed");
      return parseModelText(text, path, model);
    }
    Status s = parseBinary(path, static_cast<int64_t>(size), model);
    if (s.isOk())
      return s;
    return Status::error(path, "is a text file but neither ONNX text syntax (which starts "
                               "with '<ir_version: ..., opset_import: [...]>' or a graph "
                               "header 'name (inputs) => (outputs)') nor a binary ONNX model; "
                               "it starts with '" +
                                   firstLine(head) + "'");
  }
  return parseBinary(path, static_cast<int64_t>(size), model);
}

} // namespace dtc::onnxio
