#pragma once
/// CodecModel: what a codec costs in the simulator. Wire bytes come from the real codec
/// (codec::AnyCodec::encoded_bytes, parsed from the same strings as gradsync-train's --codec) and
/// its bypass rule (codec::bypass_threshold: small tensors go as fp32, like the Synchronizer);
/// encode and decode time from throughputs in GB/s of fp32 input, defaulting to bench_codec's
/// measurements on a quiet machine (2026-11-25, one thread; their raw output was not committed:
/// benchmarks/codec/README.md says how to measure and pass your own). fp32 costs no codec time:
/// the collectives send raw floats and sum them as they arrive (memory-bound work hidden under the
/// transfer). A parameter server adds the pushes at `sum_gbps`.
///
/// \code
///   auto c = gradsync::sim::CodecModel::parse("qsgd8");
///   c.wire_bytes(40'000, false);   // the real Qsgd<8>'s encoded size of 40,000 values
///   c.encode_seconds(40'000);      // 160 kB / 5.06 GB/s
///   c.encode_gbps = 2.0;           // or measure bench_codec on your machine and set it
/// \endcode
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <gradsync/codec/any.hpp>
#include <gradsync/codec/bypass.hpp>
#include <gradsync/codec/traits.hpp>
#include <gradsync/core/layout.hpp>

namespace gradsync::sim {

struct CodecModel {
  codec::AnyCodec codec;        ///< the real codec (sizes, bypass, lossless)
  double encode_gbps = 0;       ///< GB/s of fp32 input; 0 = free
  double decode_gbps = 0;       ///< GB/s of fp32 output; 0 = free
  double sum_gbps = 10.34;      ///< a parameter server's fp32 add rate (bench_codec's fp32 decode)

  /// The codec `text` (gradsync-train's --codec grammar) with bench_codec's throughputs.
  static CodecModel parse(std::string_view text) {
    CodecModel m{codec::AnyCodec::parse(text)};
    std::string_view base = m.codec.name();
    if (base.starts_with("ef+")) base.remove_prefix(3);
    // name, encode GB/s, decode GB/s (bench_codec, 2026-11-25, medians of 5, CPU time)
    static constexpr struct { std::string_view name; double encode, decode; } measured[] = {
        {"fp16", 17.83, 16.97}, {"bf16", 15.50, 15.92}, {"qsgd2", 5.98, 14.80}, {"qsgd4", 8.25, 15.43},
        {"qsgd8", 8.11, 16.39},  {"qsgd16", 6.02, 16.47}, {"onebit", 5.51, 19.73}, {"topk", 1.31, 24.00}};
    for (const auto& r : measured)
      if (base == r.name) {
        m.encode_gbps = r.encode;
        m.decode_gbps = r.decode;
      }
    return m;
  }

  bool lossless() const { return codec.traits().lossless; }
  std::string describe() const { return std::string(codec.name()); }

  /// Tensors with fewer elements go as fp32 (the codec's bypass_below; codec/bypass.hpp).
  std::size_t bypass_threshold(const ModelLayout& layout) const {
    if (lossless()) return 0;
    std::vector<std::size_t> sizes;
    for (const LayerSpec& l : layout.layers()) sizes.push_back(l.elements);
    return codec::bypass_threshold(sizes, codec.traits().bypass_below);
  }
  /// Bytes on the wire for `elements` values: raw floats for fp32 (the collectives' fast path,
  /// collective/wire.hpp) and for a unit that bypasses the codec (`fp32`), else the encoded size.
  std::size_t wire_bytes(std::size_t elements, bool fp32) const {
    return raw(fp32) ? elements * sizeof(float) : codec.encoded_bytes(elements);
  }
  /// Whether a unit (`fp32`: one that bypasses the codec) goes as raw floats.
  bool raw(bool fp32) const { return fp32 || std::holds_alternative<codec::Identity>(codec.variant()); }
  double encode_seconds(std::size_t elements) const { return seconds(elements, encode_gbps); }
  double decode_seconds(std::size_t elements) const { return seconds(elements, decode_gbps); }
  double sum_seconds(std::size_t elements) const { return seconds(elements, sum_gbps); }

  /// Throws ConfigError when a throughput is negative or not a number.
  void validate() const {
    for (double g : {encode_gbps, decode_gbps, sum_gbps})
      if (!(g >= 0) || !std::isfinite(g))
        throw ConfigError("gradsync: codec throughput " + std::to_string(g) + " GB/s must be finite and >= 0 (0: free)");
  }

 private:
  static double seconds(std::size_t elements, double gbps) {
    return gbps > 0 ? double(elements) * sizeof(float) / (gbps * 1e9) : 0.0;
  }
};

}  // namespace gradsync::sim
