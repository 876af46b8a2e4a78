#pragma once
/// WatchdogChannel: the messages the ranks' watchdogs (watchdog.hpp) send each other on abort_tag.
/// Each is a Header, then a payload: the text of a failure or a verdict, or, in an answer, the
/// ranks the sender waits for as int32. The header carries the handshake's session, so a message
/// left over from an earlier synchronizer on the same transport is dropped, and the round of the
/// question an answer is for, so a late answer to an earlier question is told apart.
///
/// The watchdog's thread sends and polls; sends are best effort (the peer may be gone), and a
/// peer whose link fails is left silent, which is what a diagnosis reads as gone.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../transport/transport.hpp"
#include "tags.hpp"

namespace gradsync::schedule {

class WatchdogChannel {
 public:
  enum class Kind : std::uint32_t {
    failed,   ///< the sender failed with this text
    query,    ///< whom does the receiver wait for? (no payload)
    answer,   ///< the ranks the sender waits for, the longest-waited first
    verdict,  ///< a diagnosis's error: the receiver fails with this text verbatim
  };
  struct Header {
    std::uint64_t session = 0;
    Kind kind = Kind::failed;
    std::int32_t round = 0;  ///< which question an answer is for
  };
  static constexpr std::size_t max_payload = 4096;

  /// `user`: its messages still go out after the synchronizer's own transport is cancelled.
  WatchdogChannel(transport::Transport& user, std::uint64_t session)
      : user_(user), session_(session), buffer_(sizeof(Header) + max_payload) {}

  /// `text` to `peer`, cut to max_payload.
  void send_text(int peer, Kind kind, std::int32_t round, const std::string& text) {
    send(peer, kind, round, std::as_bytes(std::span(text.data(), std::min(text.size(), max_payload))));
  }
  /// `text` to every peer, cut to max_payload.
  void broadcast(Kind kind, std::int32_t round, const std::string& text) {
    for (int p = 0; p < user_.size(); ++p)
      if (p != user_.rank()) send_text(p, kind, round, text);
  }
  /// The answer to `peer`'s question `round`: `ranks`, as many as fit.
  void send_answer(int peer, std::int32_t round, const std::vector<int>& ranks) {
    std::vector<std::int32_t> peers(ranks.begin(), ranks.end());
    peers.resize(std::min(peers.size(), max_payload / sizeof(std::int32_t)));
    send(peer, Kind::answer, round, std::as_bytes(std::span(peers)));
  }

  /// Takes in every peer's messages of this session that have come: handle(peer, header, payload).
  template <class Handle>
  void poll(Handle&& handle) {
    for (int p = 0; p < user_.size(); ++p) {
      if (p == user_.rank()) continue;
      try {
        while (const auto got = user_.try_recv(p, abort_tag, buffer_)) {
          Header h;
          if (*got < sizeof h) continue;
          std::memcpy(&h, buffer_.data(), sizeof h);
          if (h.session != session_) continue;  // left over from an earlier synchronizer
          handle(p, h, std::span<const std::byte>(buffer_).subspan(sizeof h, *got - sizeof h));
        }
      } catch (...) {  // a peer's link failed: its silence speaks for it
      }
    }
  }

  static std::string text(std::span<const std::byte> payload) {
    return std::string(reinterpret_cast<const char*>(payload.data()), payload.size());
  }
  /// An answer's ranks.
  static std::vector<int> ranks(std::span<const std::byte> payload) {
    std::vector<int> peers(payload.size() / sizeof(std::int32_t));
    if (!peers.empty()) std::memcpy(peers.data(), payload.data(), peers.size() * sizeof(std::int32_t));
    return peers;
  }

 private:
  void send(int peer, Kind kind, std::int32_t round, std::span<const std::byte> payload) {
    std::vector<std::byte> m(sizeof(Header) + payload.size());
    const Header h{session_, kind, round};
    std::memcpy(m.data(), &h, sizeof h);
    if (!payload.empty()) std::memcpy(m.data() + sizeof h, payload.data(), payload.size());
    try {
      user_.send(peer, abort_tag, m);
    } catch (...) {  // best effort: the peer may be gone
    }
  }

  transport::Transport& user_;
  std::uint64_t session_;
  std::vector<std::byte> buffer_;  // the watchdog's thread only
};

}  // namespace gradsync::schedule
