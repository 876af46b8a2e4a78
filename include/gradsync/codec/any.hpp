#pragma once
/// AnyCodec: every concrete codec in one std::variant, chosen at run time from a string, and
/// itself a Codec (one Synchronizer instantiation serves every choice).
///
///   fp32 | fp16 | bf16 | qsgd2 | qsgd4 | qsgd8 | qsgd16 | onebit | topk   then options, each ":key=value":
///   bucket=N (qsgd, onebit)   norm=max|l2 (qsgd)   ratio=R or a bare R (topk)
///   bypass=N|auto (every lossy codec: tensors under N elements go as fp32; auto, the default of
///   qsgd, onebit and topk: the study's rule, > 99% of the parameters compressed; codec/bypass.hpp)
///   "ef+" before fp16, bf16 or qsgdN adds error feedback (ErrorFeedback<C>).
///
/// \code
///   auto c = gradsync::codec::AnyCodec::parse("qsgd4:bucket=1024:norm=l2");
///   auto t = gradsync::codec::AnyCodec::parse("topk:0.001");
///   c.encode(grad, wire, ctx);        // same calls as any codec
/// \endcode
#include <charconv>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include "bfloat16.hpp"
#include "error_feedback.hpp"
#include "half.hpp"
#include "identity.hpp"
#include "onebit.hpp"
#include "qsgd.hpp"
#include "topk.hpp"

namespace gradsync::codec {

class AnyCodec {
 public:
  using Variant = std::variant<Identity, Half, BFloat16, Qsgd<2>, Qsgd<4>, Qsgd<8>, Qsgd<16>, OneBit, TopK,
                               ErrorFeedback<Half>, ErrorFeedback<BFloat16>, ErrorFeedback<Qsgd<2>>,
                               ErrorFeedback<Qsgd<4>>, ErrorFeedback<Qsgd<8>>, ErrorFeedback<Qsgd<16>>>;

  /// The codec strings parse() takes (its errors and gradsync-train --help list them).
  static constexpr std::string_view grammar =
      "fp32, fp16, bf16, qsgd2|qsgd4|qsgd8|qsgd16[:bucket=N][:norm=max|l2], onebit[:bucket=N], "
      "topk[:R|:ratio=R] with 0 < R <= 1; lossy ones also take [:bypass=N|auto]; prefix fp16, bf16 or "
      "qsgdN with \"ef+\" for error feedback";

  AnyCodec() = default;
  template <class C>
    requires std::constructible_from<Variant, C>
  AnyCodec(C c) : v_(std::move(c)) {}

  /// Parses a codec description; throws ConfigError naming the string and the valid choices.
  static AnyCodec parse(std::string_view text) {
    const auto fail = [text](const std::string& why) -> ConfigError {
      return ConfigError("gradsync: codec \"" + std::string(text) + "\": " + why + "; valid: " + std::string(grammar));
    };
    std::vector<std::string_view> parts;  // split on ':', empty parts kept so they are rejected
    for (std::size_t from = 0;;) {
      const std::size_t colon = text.find(':', from);
      parts.push_back(text.substr(from, colon == std::string_view::npos ? colon : colon - from));
      if (colon == std::string_view::npos) break;
      from = colon + 1;
    }
    std::string_view base = parts[0];
    const bool ef = base.starts_with("ef+");
    if (ef) base.remove_prefix(3);

    AnyCodec c;
    if (base == "fp32") c = Identity{};
    else if (base == "fp16") c = Half{};
    else if (base == "bf16") c = BFloat16{};
    else if (base == "qsgd2") c = Qsgd<2>{};
    else if (base == "qsgd4") c = Qsgd<4>{};
    else if (base == "qsgd8") c = Qsgd<8>{};
    else if (base == "qsgd16") c = Qsgd<16>{};
    else if (base == "onebit") c = OneBit{};
    else if (base == "topk") c = TopK{};
    else throw fail("unknown codec \"" + std::string(base) + "\"");

    for (std::size_t p = 1; p < parts.size(); ++p) {
      const std::string_view opt = parts[p];
      const std::size_t eq = opt.find('=');
      const bool bare = eq == std::string_view::npos;
      const std::string_view key = bare ? (base == "topk" ? "ratio" : opt) : opt.substr(0, eq);  // "topk:0.01"
      const std::string_view value = bare ? opt : opt.substr(eq + 1);
      if (!std::visit([&](auto& x) { return set_option(x, key, value); }, c.v_))
        throw fail("\"" + std::string(opt) + "\" is not an option of " + std::string(base) + " (or its value is malformed)");
    }
    try {  // bucket and ratio are checked where they are used; check them now, naming the string
      std::visit([](const auto& x) { if constexpr (requires { x.wire_bucket(0); }) (void)x.wire_bucket(0); }, c.v_);
    } catch (const ConfigError& e) {
      throw fail(e.what());
    }
    if (ef)
      c = std::visit(
          [&](const auto& x) -> AnyCodec {
            if constexpr (std::constructible_from<Variant, ErrorFeedback<std::decay_t<decltype(x)>>>)
              return ErrorFeedback<std::decay_t<decltype(x)>>{x};
            else
              throw fail("ef+ needs fp16, bf16 or qsgdN (fp32 loses nothing; onebit and topk keep their own residual)");
          },
          c.v_);
    return c;
  }

  const Variant& variant() const { return v_; }

  std::string_view name() const { return std::visit([](const auto& c) { return std::string_view(c.name()); }, v_); }
  /// The chosen codec's traits.
  Traits traits() const { return std::visit([](const auto& c) { return c.traits(); }, v_); }
  std::size_t encoded_bytes(std::size_t n) const { return std::visit([n](const auto& c) { return c.encoded_bytes(n); }, v_); }
  std::size_t encode(std::span<const float> in, std::span<std::byte> out, const EncodeContext& ctx) const {
    return std::visit([&](const auto& c) { return c.encode(in, out, ctx); }, v_);
  }
  void decode(std::span<const std::byte> wire, std::span<float> out) const {
    std::visit([&](const auto& c) { c.decode(wire, out); }, v_);
  }
  void decode_add(std::span<const std::byte> wire, std::span<float> acc) const {
    std::visit([&](const auto& c) { c.decode_add(wire, acc); }, v_);
  }

 private:
  template <class T>
  static bool number(std::string_view s, T& out) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
  }
  /// Applies key=value to codec c; false when c has no such option or the value is malformed.
  template <class C>
  static bool set_option(C& c, std::string_view key, std::string_view value) {
    if constexpr (requires { c.bypass_below; })
      if (key == "bypass") {
        if (value != "auto") return number(value, c.bypass_below);
        c.bypass_below = bypass_auto;
        return true;
      }
    if constexpr (requires { c.bucket; })
      if (key == "bucket") return number(value, c.bucket);
    if constexpr (requires { c.norm; })
      if (key == "norm") {
        for (const QsgdNorm n : {QsgdNorm::max, QsgdNorm::l2})
          if (value == norm_text(n)) c.norm = n;
        return value == norm_text(QsgdNorm::max) || value == norm_text(QsgdNorm::l2);
      }
    if constexpr (requires { c.ratio; })
      if (key == "ratio") return number(value, c.ratio);
    return false;
  }

  Variant v_{};
};
GRADSYNC_CHECK_CODEC(AnyCodec);

}  // namespace gradsync::codec
