// libFuzzer targets for the trainer's file readers (a dataset and a checkpoint are user input):
// built twice, -DFUZZ_IDX (parse_idx) and -DFUZZ_CHECKPOINT (CheckpointReader). Garbage must end in
// a std::runtime_error whose message starts with the file's path; any other exception, a crash or
// a sanitizer report is a finding.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gradsync/trainer/formats.hpp"

using namespace gradsync::trainer;

namespace {
void expect_clear_error(const std::runtime_error& e, const std::string& path) {
  if (std::strncmp(e.what(), path.c_str(), path.size()) != 0) std::abort();  // not naming the file
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
#if defined(FUZZ_IDX)
  // The first two bytes say where the image file ends and the label file begins.
  if (size < 2) return 0;
  const std::size_t split = std::min<std::size_t>(size - 2, std::size_t(data[0]) << 8 | data[1]);
  const std::span<const unsigned char> images(data + 2, split), labels(data + 2 + split, size - 2 - split);
  try {
    const IdxPair p = parse_idx(images, labels, "images.idx", "labels.idx");
    if (p.pixels.size() != p.count * p.rows * p.cols || p.labels.size() != p.count) std::abort();
    for (const unsigned char y : p.labels)
      if (y >= 10) std::abort();
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind("images.idx: ", 0) != 0 && what.rfind("labels.idx: ", 0) != 0) std::abort();
  }
#elif defined(FUZZ_CHECKPOINT)
  static constexpr char magic[8] = {'G', 'S', 'Y', 'N', 'C', 'K', 'P', '1'};
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    CheckpointReader reader(in, magic, "fuzz.ckpt", "gradsync-train checkpoint");
    (void)reader.iteration();
    const auto& h = reader.header();
    for (const char* key : {"config", "loss_scaler", "sync", "sync_state", "rank"}) (void)h.contains(key);
    std::vector<float> a(3), b(0), c(17);  // a model's arrays, in order
    reader.read(a, "a");
    reader.read(b, "b");
    reader.read(c, "c");
  } catch (const std::runtime_error& e) {
    expect_clear_error(e, "fuzz.ckpt");
  }
#else
#error "define FUZZ_IDX or FUZZ_CHECKPOINT"
#endif
  return 0;
}
