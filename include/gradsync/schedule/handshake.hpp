#pragma once
/// The setup handshake (the Synchronizer runs it at construction): every rank sends rank 0 what it believes (model signature, policies,
/// world size); rank 0 compares and sends every rank the same verdict, so a mismatch fails on all
/// ranks with one message that names the rank that differs and in what. The verdict also carries
/// a session number, the same on every rank and new for every handshake, which later control
/// messages (a failing rank's abort) carry so that one left over from an earlier synchronizer on
/// the same transport is never mistaken for news.
#include <chrono>
#include <cstring>
#include <random>
#include <string>

#include "../core/error.hpp"
#include "../transport/transport.hpp"

namespace gradsync::schedule {

struct HandshakeInfo {
  std::uint64_t layout_signature = 0;
  std::int32_t world = 0;
  std::uint32_t layers = 0;
  char policies[112] = {};  ///< "fixed:40000/forward/fp32/ring/mean/..." (truncated)
};

namespace detail {
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
  if (std::strncmp(other.policies, root.policies, sizeof root.policies) != 0)
    return who + " uses policies '" + std::string(other.policies) + "' but rank 0 uses '" +
           std::string(root.policies) + "': pass the same policies and options on every rank";
  return {};
}
}  // namespace detail

/// Runs the handshake on `t`; throws PeerError with the same message on every rank on mismatch.
/// Returns the session number.
inline std::uint64_t handshake(transport::Transport& t, HandshakeInfo mine) {
  const int n = t.size();
  auto bytes = [](auto& v) { return std::as_writable_bytes(std::span(&v, 1)); };
  struct Verdict {
    std::uint64_t session = 0;
    char text[1016] = {};  // empty: all agree
  } verdict;
  if (t.rank() == 0) {
    verdict.session = std::random_device{}() ^ static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    std::string text;
    for (int r = 1; r < n; ++r) {
      HandshakeInfo other;
      const std::size_t got = t.recv(r, transport::handshake_tag, bytes(other));
      if (got != sizeof other) text = "rank " + std::to_string(r) + " sent a malformed handshake (different gradsync version?)";
      else if (text.empty()) text = detail::compare_hello(mine, other, r);
    }
    std::strncpy(verdict.text, text.c_str(), sizeof verdict.text - 1);
    for (int r = 1; r < n; ++r) t.send(r, transport::handshake_tag, std::as_bytes(std::span(&verdict, 1)));
  } else {
    t.send(0, transport::handshake_tag, std::as_bytes(std::span(&mine, 1)));
    if (t.recv(0, transport::handshake_tag, bytes(verdict)) != sizeof verdict)
      throw PeerError("gradsync: ranks disagree: rank 0 sent a malformed handshake verdict (different gradsync version?)");
  }
  if (verdict.text[0] != 0) throw PeerError("gradsync: ranks disagree: " + std::string(verdict.text));
  return verdict.session;
}

}  // namespace gradsync::schedule
