// ok: a user's codec that declares its traits; ko: the same codec with a lossless() member of its
// own besides, which nothing reads (its traits() counts), so it is refused rather than ignored.
#include <gradsync/gradsync.hpp>
namespace gs = gradsync;
struct Mine {
  gs::codec::Identity fp32;
  static constexpr gs::codec::Traits traits() { return {.lossless = true}; }
#ifdef GRADSYNC_FAILTEST_KO
  bool lossless() const { return true; }
#endif
  std::string_view name() const { return "mine"; }
  std::size_t encoded_bytes(std::size_t n) const { return fp32.encoded_bytes(n); }
  std::size_t encode(std::span<const float> in, std::span<std::byte> out, const gs::codec::EncodeContext& ctx) const {
    return fp32.encode(in, out, ctx);
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const { fp32.decode(wire, out); }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const { fp32.decode_add(wire, acc); }
};
int main() { return sizeof(gs::Synchronizer<gs::slicing::FixedSlices, gs::priority::Fifo, Mine, gs::collective::Ring>) == 0; }
