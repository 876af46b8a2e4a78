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
#include "../transport/bootstrap.hpp"
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

/// Rank 0's reading of rank `rank`'s hello: empty when it agrees with `root`.
inline std::string judge(const HandshakeInfo& root, std::span<const std::byte> hello, int rank) {
  if (hello.size() < sizeof(HelloHeader))
    return "rank " + std::to_string(rank) + " sent a malformed handshake (different gradsync version?)";
  const auto h = header_of<HelloHeader>(hello);
  return compare_hello(root, {h.layout_signature, h.world, h.layers, text_of(hello, sizeof h)}, rank);
}

}  // namespace detail

/// Runs the handshake on `t`; throws PeerError with the same message on every rank on mismatch.
/// Returns the session number.
inline std::uint64_t handshake(transport::Transport& t, const HandshakeInfo& mine) {
  if (mine.agreed.size() > max_agreed_text)
    throw UsageError("gradsync: the policies' descriptions take " + std::to_string(mine.agreed.size()) +
                     " characters, more than the handshake's " + std::to_string(max_agreed_text) +
                     ": give the policies shorter describe() texts");
  const auto hello = detail::message(detail::HelloHeader{mine.layout_signature, mine.world, mine.layers}, mine.agreed);
  constexpr std::size_t max_hello = sizeof(detail::HelloHeader) + max_agreed_text;
  std::vector<std::byte> verdict;
  if (t.rank() == 0) {
    std::string why;
    try {
      const auto hellos = transport::gather(t, handshake_tag, hello, max_hello);
      for (std::size_t r = 1; r < hellos.size() && why.empty(); ++r) why = detail::judge(mine, hellos[r], static_cast<int>(r));
    } catch (const PeerError& e) {
      why = e.what();  // a rank that speaks another protocol: every rank is told
    }
    const std::uint64_t session =
        std::random_device{}() ^ static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    verdict = detail::message(detail::VerdictHeader{session}, why);
  } else {
    transport::gather(t, handshake_tag, hello, max_hello);
  }
  transport::broadcast(t, handshake_tag, verdict, sizeof(detail::VerdictHeader) + detail::max_verdict_text);
  if (verdict.size() < sizeof(detail::VerdictHeader))
    throw PeerError("gradsync: ranks disagree: rank 0 sent a malformed handshake verdict (different gradsync version?)");
  const std::string why = detail::text_of(verdict, sizeof(detail::VerdictHeader));
  if (!why.empty()) throw PeerError("gradsync: ranks disagree: " + why);
  return detail::header_of<detail::VerdictHeader>(verdict).session;
}

}  // namespace gradsync::schedule
