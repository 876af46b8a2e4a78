// libFuzzer target for every decoder (built with clang++ -fsanitize=fuzzer,address,undefined).
// Input: byte 0 picks the codec configuration and the mode, bytes 1-2 the unit size, the rest
// is either the whole wire (raw mode: header parsing) or, behind a valid header, the payload
// (framed mode: payload decoders). Anything but a WireError, or any sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "codec_cases.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const bool framed = data[0] & 0x80;
  const auto c = codec_cases::make(codec_cases::specs[(data[0] & 0x7f) % codec_cases::specs.size()]);
  const std::size_t n = (std::size_t{data[1]} | std::size_t{data[2]} << 8) % 5000;
  const std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(data + 3), size - 3);

  std::vector<std::byte> wire;
  if (framed) {  // a genuine header for n elements, then the fuzzer's bytes as payload
    const std::vector<float> zeros(n, 0.0f);
    wire.resize(c.encoded_bytes(n));
    wire.resize(c.encode(zeros, wire, {}));
    for (std::size_t i = gradsync::codec::header_bytes; i < wire.size() && !rest.empty(); ++i)
      wire[i] = rest[(i - gradsync::codec::header_bytes) % rest.size()];
  } else {
    wire.assign(rest.begin(), rest.end());
  }
  std::vector<float> out(n, 1.0f);
  try {
    c.decode(wire, out);
    c.decode_add(wire, out);
  } catch (const gradsync::WireError&) {
  }
  return 0;
}
