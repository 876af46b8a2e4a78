#pragma once
// The trainer's file formats as bytes, apart from any model: IDX datasets and checkpoint files.
// Both are user input: every reader throws std::runtime_error whose message starts with the file's
// path and says what is wrong, and none trusts a count or length it reads (libFuzzer targets
// fuzz_idx and fuzz_checkpoint, tests/trainer/fuzz_formats.cpp).
#include <cstdint>
#include <istream>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

namespace gradsync::trainer {

/// Throws std::runtime_error "<path>: <problem>; install the Debian package dataset-fashion-mnist ...".
[[noreturn]] void data_error(const std::string& path, const std::string& problem);

/// An IDX image file (magic 0x00000803: count, rows, cols, then count*rows*cols bytes) and its label
/// file (magic 0x00000801: count, then count bytes, each < classes), checked against each other.
struct IdxPair {
  std::size_t count = 0, rows = 0, cols = 0;
  std::span<const unsigned char> pixels, labels;
};
IdxPair parse_idx(std::span<const unsigned char> images, std::span<const unsigned char> labels,
                  const std::string& images_path, const std::string& labels_path, std::size_t classes = 10);

/// A checkpoint (or per-rank codec state) file: 8 magic bytes, a little-endian u64 header length
/// (at most 1 MiB), a JSON object header with an unsigned "iteration", then arrays, each a u64
/// count and that many floats. The header's known keys have their types checked ("config" and
/// "loss_scaler" objects, "sync" a string, "sync_state" a boolean, "rank" unsigned).
class CheckpointReader {
 public:
  CheckpointReader(std::istream& in, const char (&magic)[8], std::string path, std::string what);
  const nlohmann::json& header() const { return header_; }
  std::size_t iteration() const { return iteration_; }
  /// The next array, which must hold exactly out.size() values (`what` names it in errors).
  void read(std::span<float> out, const std::string& what);

 private:
  [[noreturn]] void fail(const std::string& problem) const;
  std::istream& in_;
  std::string path_, what_;
  std::uint64_t remaining_ = 0;  // bytes left in the stream
  nlohmann::json header_;
  std::size_t iteration_ = 0;
};

}  // namespace gradsync::trainer
