#pragma once
/// Link: one network link as gradsync describes it: bandwidth, one-way latency, burst, and whether
/// a rank's sends share one NIC. The Throttled transport emulates it (transport/throttled.hpp);
/// the simulator models it (gradsync/sim/network.hpp). Both parse the strings gradsync-train's and
/// gradsync-sim's --bandwidth take.
///
/// \code
///   auto link = gradsync::transport::Link::parse("10gbit+50us/nic");   // 10 Gbit/s, 50 us, one NIC per rank
///   link.bytes_per_second();                                            // 1.25e9
/// \endcode
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "../detail/parse.hpp"

namespace gradsync::transport {

/// A link: sends of `gbit` Gbit/s that arrive `latency` after they left.
struct Link {
  double gbit = 10.0;                                ///< bandwidth in Gbit/s (10^9 bit/s)
  std::chrono::microseconds latency{0};              ///< one-way delay added to every message
  std::size_t burst = 64u << 10;                     ///< bytes that may leave at once (tbf burst)
  /// One bucket for all of this rank's outgoing traffic (a NIC shaped with tc, as in P3) instead
  /// of one per peer (a full-bisection fabric where each pair of ranks has its own link).
  bool shared_nic = false;

  /// "1gbit", "10gbit", "500mbit", "2.5gbit", optionally "+<latency>" in us or ms ("1gbit+50us"),
  /// optionally "/nic" for one shared bucket per rank ("10gbit+20us/nic").
  static Link parse(std::string_view whole) {
    const std::string_view valid =
        "<rate>gbit or <rate>mbit, optionally +<n>us or +<n>ms, optionally /nic (e.g. 1gbit, 500mbit+100us/nic)";
    auto bad = [&]() -> Link { gradsync::detail::bad_policy("link", whole, valid); };
    Link link;
    std::string_view text = whole;
    if (text.ends_with("/nic")) {
      link.shared_nic = true;
      text.remove_suffix(4);
    }
    std::string_view rate = text, lat;
    const auto plus = text.find('+');
    if (plus != std::string_view::npos) {
      rate = text.substr(0, plus);
      lat = text.substr(plus + 1);
    }
    double scale = 0;
    if (rate.ends_with("gbit")) scale = 1.0;
    else if (rate.ends_with("mbit")) scale = 1e-3;
    else return bad();
    rate.remove_suffix(4);
    const std::string number(rate);
    char* end = nullptr;
    const double v = number.empty() ? 0.0 : std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(v > 0) || !std::isfinite(v)) return bad();
    link.gbit = v * scale;
    if (plus != std::string_view::npos) {
      const auto latency = parse_latency(lat);
      if (!latency) return bad();
      link.latency = *latency;
    }
    return link;
  }

  /// "<n>us" or "<n>ms" (a whole number); nullopt when malformed.
  static std::optional<std::chrono::microseconds> parse_latency(std::string_view lat) {
    std::size_t mult = 0;
    if (lat.ends_with("us")) mult = 1;
    else if (lat.ends_with("ms")) mult = 1000;
    else return std::nullopt;
    lat.remove_suffix(2);
    std::size_t n = 0;
    const auto [p, ec] = std::from_chars(lat.data(), lat.data() + lat.size(), n);
    if (ec != std::errc{} || p != lat.data() + lat.size()) return std::nullopt;
    return std::chrono::microseconds(n * mult);
  }
  /// The bandwidth in bytes per second.
  double bytes_per_second() const { return gbit * 1e9 / 8; }
};

}  // namespace gradsync::transport
