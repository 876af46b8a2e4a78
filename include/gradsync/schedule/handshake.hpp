#pragma once
/// The setup handshake (the Synchronizer runs it at construction): every rank sends rank 0 what it
/// believes - model signature, world size, and in full every policy with its knobs and the options
/// that must agree - and rank 0 compares and sends every rank the same verdict, so a mismatch fails
/// on all ranks with one message that names the rank that differs and shows both texts whole. The
/// verdict also carries a session number, the same on every rank and new for every handshake, which
/// later control messages (schedule::Watchdog's) carry so that one left over from an earlier
/// synchronizer on the same transport is never mistaken for news.
///
/// \code
///   const std::uint64_t session = schedule::handshake(transport, {signature, world, layers,
///                                                                 "fixed:40000/forward/qsgd8:bucket=1024/ring/mean/seed=7"});
/// \endcode
#include <chrono>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../transport/transport.hpp"
#include "tags.hpp"

namespace gradsync::schedule {

struct HandshakeInfo {
  std::uint64_t layout_signature = 0;
  std::int32_t world = 0;
  std::uint32_t layers = 0;
  /// Everything else the ranks must agree on, whole: "fixed:40000/forward/fp32/ring/mean/...".
  std::string agreed;
};

/// The longest HandshakeInfo::agreed a rank may send.
inline constexpr std::size_t max_agreed_text = 16 * 1024;

namespace detail {

/// On the wire: these fixed fields, then the text (a hello: `agreed`; a verdict: the error, empty
/// when all agree).
struct HelloHeader {
  std::uint64_t layout_signature = 0;
  std::int32_t world = 0;
  std::uint32_t layers = 0;
};
struct VerdictHeader {
  std::uint64_t session = 0;
};
/// The longest verdict: both texts whole, the fields that differ, and words around them.
inline constexpr std::size_t max_verdict_text = 4 * max_agreed_text + 1024;

template <class Header>
std::vector<std::byte> message(const Header& h, const std::string& text) {
  std::vector<std::byte> m(sizeof h + text.size());
  std::memcpy(m.data(), &h, sizeof h);
  std::memcpy(m.data() + sizeof h, text.data(), text.size());
  return m;
}
template <class Header>
Header header_of(std::span<const std::byte> m) {
  Header h;
  std::memcpy(&h, m.data(), sizeof h);
  return h;
}
inline std::string text_of(std::span<const std::byte> m, std::size_t header) {
  return {reinterpret_cast<const char*>(m.data()) + header, m.size() - header};
}

/// "a/b/c" and "a/x/c": "'b' vs 'x'" (the first '/'-separated field that differs).
inline std::string first_difference(const std::string& a, const std::string& b) {
  std::size_t from = 0;
  for (;;) {
    const std::size_t ea = a.find('/', from), eb = b.find('/', from);
    const std::string fa = a.substr(from, ea - from), fb = b.substr(from, eb - from);
    if (fa != fb || ea == std::string::npos || eb == std::string::npos) return "'" + fa + "' vs '" + fb + "'";
    from = ea + 1;
  }
}

inline std::string compare_hello(const HandshakeInfo& root, const HandshakeInfo& other, int rank) {
  const std::string who = "rank " + std::to_string(rank);
  if (other.world != root.world)
    return who + " sees " + std::to_string(other.world) + " ranks but rank 0 sees " + std::to_string(root.world) +
           ": start every rank in the same job / group";
  if (other.layout_signature != root.layout_signature || other.layers != root.layers)
    return who + " has a different model layout (" + std::to_string(other.layers) + " layers, signature " +
           std::to_string(other.layout_signature) + ") than rank 0 (" + std::to_string(root.layers) +
           " layers, signature " + std::to_string(root.layout_signature) +
           "): build the same model with the same parameter names and sizes on every rank";
  if (other.agreed != root.agreed)
    return who + " uses policies '" + other.agreed + "' but rank 0 uses '" + root.agreed + "' (they differ in " +
           first_difference(other.agreed, root.agreed) + "): pass the same policies and options on every rank";
  return {};
}

}  // namespace detail

/// Runs the handshake on `t`; throws PeerError with the same message on every rank on mismatch.
/// Returns the session number.
inline std::uint64_t handshake(transport::Transport& t, const HandshakeInfo& mine) {
  if (mine.agreed.size() > max_agreed_text)
    throw UsageError("gradsync: the policies' descriptions take " + std::to_string(mine.agreed.size()) +
                     " characters, more than the handshake's " + std::to_string(max_agreed_text) +
                     ": give the policies shorter describe() texts");
  const int n = t.size();
  std::vector<std::byte> in;
  std::string verdict;
  std::uint64_t session = 0;
  if (t.rank() == 0) {
    session = std::random_device{}() ^ static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    in.resize(sizeof(detail::HelloHeader) + max_agreed_text);
    for (int r = 1; r < n; ++r) {
      const std::size_t got = t.recv(r, handshake_tag, in);
      if (got < sizeof(detail::HelloHeader)) {
        if (verdict.empty()) verdict = "rank " + std::to_string(r) + " sent a malformed handshake (different gradsync version?)";
        continue;
      }
      const auto m = std::span(in).first(got);
      const auto h = detail::header_of<detail::HelloHeader>(m);
      const HandshakeInfo other{h.layout_signature, h.world, h.layers, detail::text_of(m, sizeof h)};
      if (verdict.empty()) verdict = detail::compare_hello(mine, other, r);
    }
    const auto out = detail::message(detail::VerdictHeader{session}, verdict);
    for (int r = 1; r < n; ++r) t.send(r, handshake_tag, out);
  } else {
    t.send(0, handshake_tag,
           detail::message(detail::HelloHeader{mine.layout_signature, mine.world, mine.layers}, mine.agreed));
    in.resize(sizeof(detail::VerdictHeader) + detail::max_verdict_text);
    const std::size_t got = t.recv(0, handshake_tag, in);
    if (got < sizeof(detail::VerdictHeader))
      throw PeerError("gradsync: ranks disagree: rank 0 sent a malformed handshake verdict (different gradsync version?)");
    const auto m = std::span(in).first(got);
    session = detail::header_of<detail::VerdictHeader>(m).session;
    verdict = detail::text_of(m, sizeof(detail::VerdictHeader));
  }
  if (!verdict.empty()) throw PeerError("gradsync: ranks disagree: " + verdict);
  return session;
}

}  // namespace gradsync::schedule
