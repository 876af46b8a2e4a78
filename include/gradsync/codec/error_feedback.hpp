#pragma once
/// ErrorFeedback<C>: residual memory around any lossy codec. Encode sends C(g + e) and keeps
/// e' = (g + e) - decode(C(g + e)) in the unit's residual (EncodeContext::residual), so the
/// codec's error is re-sent later instead of lost; when g + e holds a NaN or Inf, the residual
/// stays as it was. The wire form is C's own; without a residual
/// (a partial sum re-encoded by a collective) it is exactly C.
///
/// \code
///   gradsync::codec::ErrorFeedback<gradsync::codec::Qsgd<2>> c;
///   std::vector<float> residual(n);
///   c.encode(grad, wire, {.iteration = step, .unit = u, .residual = residual});
/// \endcode
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "concept.hpp"
#include "detail/elementwise.hpp"
#include "identity.hpp"
#include "memory.hpp"

namespace gradsync::codec {

/// \tparam C the lossy codec whose error is fed back; its name() must be constexpr
template <Codec C>
struct ErrorFeedback {
  static constexpr std::uint8_t id = C::id;
  C inner{};

  constexpr std::string_view name() const { return {name_chars.data(), name_chars.size() - 1}; }
  /// The inner codec's grain and bypass, with a residual of its own.
  constexpr Traits traits() const {
    const Traits t = inner.traits();
    return {.lossless = false, .needs_residual = true, .grain = t.grain, .bypass_below = t.bypass_below};
  }
  std::size_t encoded_bytes(std::size_t n) const { return inner.encoded_bytes(n); }
  std::size_t encode(std::span<const float> in, std::span<std::byte> out, const EncodeContext& ctx) const {
    std::span<float> e = ctx.residual;
    if (e.empty()) return inner.encode(in, out, ctx);
    if (e.size() != in.size())
      throw UsageError("gradsync: " + std::string(name()) + " residual has " + std::to_string(e.size()) +
                       " elements, the unit " + std::to_string(in.size()) + "; keep one residual per unit");
    thread_local std::vector<float> corrected;  // scratch: codecs are shared across threads
    corrected.resize(in.size());
    detail::for_each_index(thrust::host, in.size(), detail::SumKernel{in.data(), e.data(), corrected.data()});
    EncodeContext plain = ctx;
    plain.residual = {};
    const std::size_t bytes = inner.encode(corrected, out, plain);
    // An overflow (a loss scaler's, whose step is then skipped) goes on the wire for every rank to
    // see, but stays out of the residual, which would otherwise carry it into every later unit.
    if (first_non_finite(Identity{}, corrected)) return bytes;
    inner.decode(out.first(bytes), e);
    detail::for_each_index(thrust::host, in.size(), detail::ErrorKernel{corrected.data(), e.data()});
    return bytes;
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const { inner.decode(wire, out); }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const { inner.decode_add(wire, acc); }

 private:
  static constexpr auto name_chars = [] {
    constexpr std::string_view prefix = "ef+", base = C{}.name();
    std::array<char, prefix.size() + base.size() + 1> s{};
    for (std::size_t i = 0; i < prefix.size(); ++i) s[i] = prefix[i];
    for (std::size_t i = 0; i < base.size(); ++i) s[prefix.size() + i] = base[i];
    return s;
  }();
};

}  // namespace gradsync::codec
