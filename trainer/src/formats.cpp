#include "gradsync/trainer/formats.hpp"

#include <cstring>
#include <stdexcept>

namespace gradsync::trainer {

void data_error(const std::string& path, const std::string& problem) {
  throw std::runtime_error(path + ": " + problem +
                           "; install the Debian package dataset-fashion-mnist "
                           "(apt-get install dataset-fashion-mnist) or pass the right directory");
}

namespace {
std::uint32_t be32(std::span<const unsigned char> b, std::size_t at) {
  return std::uint32_t(b[at]) << 24 | std::uint32_t(b[at + 1]) << 16 | std::uint32_t(b[at + 2]) << 8 | b[at + 3];
}
}  // namespace

IdxPair parse_idx(std::span<const unsigned char> img, std::span<const unsigned char> lab,
                  const std::string& images_path, const std::string& labels_path, std::size_t classes) {
  if (img.size() < 16 || be32(img, 0) != 0x00000803)
    data_error(images_path, "not an IDX image file (magic number 0x00000803 expected)");
  if (lab.size() < 8 || be32(lab, 0) != 0x00000801)
    data_error(labels_path, "not an IDX label file (magic number 0x00000801 expected)");
  const std::uint64_t n = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12);
  const std::uint64_t pixels = img.size() - 16, per_image = rows * cols;  // < 2^64: no overflow
  // Divides instead of multiplying n * rows * cols, which overflows for hostile headers.
  if (per_image == 0 || pixels % per_image != 0 || pixels / per_image != n)
    data_error(images_path, "size " + std::to_string(img.size()) + " does not match its header (" + std::to_string(n) +
                                " images of " + std::to_string(rows) + "x" + std::to_string(cols) + ")");
  if (be32(lab, 4) != n || lab.size() - 8 != n)
    data_error(labels_path, "holds " + std::to_string(be32(lab, 4)) + " labels in " + std::to_string(lab.size()) +
                                " bytes; " + std::to_string(n) + " expected to match " + images_path);
  IdxPair p{n, rows, cols, img.subspan(16), lab.subspan(8)};
  for (const unsigned char y : p.labels)
    if (y >= classes)
      data_error(labels_path, "label " + std::to_string(y) + " is not in 0.." + std::to_string(classes - 1));
  return p;
}

CheckpointReader::CheckpointReader(std::istream& in, const char (&magic)[8], std::string path, std::string what)
    : in_(in), path_(std::move(path)), what_(std::move(what)) {
  const auto start = in.tellg();
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  in.seekg(start);
  if (!in || start < 0 || end < start) fail("cannot read");
  remaining_ = std::uint64_t(end - start);
  char got[sizeof magic];
  std::uint64_t len = 0;
  if (remaining_ < sizeof got + sizeof len) fail("too short to be a " + what_);
  in.read(got, sizeof got);
  in.read(reinterpret_cast<char*>(&len), sizeof len);
  remaining_ -= sizeof got + sizeof len;
  if (!in || std::memcmp(got, magic, sizeof magic) != 0) fail("not a " + what_);
  if (len > (1u << 20) || len > remaining_) fail("corrupt " + what_ + " header (length " + std::to_string(len) + ")");
  std::string text(len, '\0');
  in.read(text.data(), std::streamsize(len));
  remaining_ -= len;
  header_ = nlohmann::json::parse(text, nullptr, false);
  if (!in || header_.is_discarded() || !header_.is_object()) fail("corrupt " + what_ + " header (not a JSON object)");
  const auto type_is = [&](const char* key, bool ok, const char* type) {
    if (header_.contains(key) && !ok) fail("corrupt " + what_ + " header (\"" + key + "\" is not " + type + ")");
  };
  const auto at = [&](const char* key) -> const nlohmann::json& { return header_[key]; };
  if (!header_.contains("iteration")) fail("corrupt " + what_ + " header (no iteration)");
  type_is("iteration", at("iteration").is_number_unsigned(), "an unsigned integer");
  type_is("rank", header_.contains("rank") && at("rank").is_number_unsigned(), "an unsigned integer");
  type_is("config", header_.contains("config") && at("config").is_object(), "an object");
  type_is("loss_scaler", header_.contains("loss_scaler") && at("loss_scaler").is_object(), "an object");
  type_is("sync", header_.contains("sync") && at("sync").is_string(), "a string");
  type_is("sync_state", header_.contains("sync_state") && at("sync_state").is_boolean(), "a boolean");
  iteration_ = header_["iteration"].get<std::size_t>();
}

void CheckpointReader::fail(const std::string& problem) const { throw std::runtime_error(path_ + ": " + problem); }

void CheckpointReader::read(std::span<float> out, const std::string& what) {
  std::uint64_t n = 0;
  if (remaining_ >= sizeof n) in_.read(reinterpret_cast<char*>(&n), sizeof n);
  if (remaining_ < sizeof n || !in_ || n != out.size())
    fail(what + " has " + std::to_string(n) + " values, this run " + std::to_string(out.size()) +
         " (truncated file or different model)");
  remaining_ -= sizeof n;
  if (n * sizeof(float) > remaining_) fail("truncated in " + what);
  in_.read(reinterpret_cast<char*>(out.data()), std::streamsize(n * sizeof(float)));
  remaining_ -= n * sizeof(float);
  if (!in_) fail("truncated in " + what);
}

}  // namespace gradsync::trainer
