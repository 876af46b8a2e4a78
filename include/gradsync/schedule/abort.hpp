#pragma once
/// PeerAbort: how a failing rank tells every peer at once, and how a rank learns one failed, so no
/// rank waits out a timeout for a peer that is gone. A failing rank sends each peer its error's
/// text on transport::abort_tag with the session of the handshake (schedule/handshake.hpp); each
/// rank polls for such messages, and one of its own session fails it with the peer's words. A
/// message of another session (left over from an earlier synchronizer on the same transport) is
/// dropped.
///
/// \code
///   schedule::PeerAbort abort(transport, session);
///   abort.tell(std::current_exception());              // on this rank's first error
///   if (auto e = abort.watch(control)) fail(e);       // a thread: until a peer fails or control stops
/// \endcode
#include <algorithm>
#include <cstdint>
#include <exception>
#include <span>
#include <string>

#include "../core/error.hpp"
#include "../transport/cancellable.hpp"
#include "../transport/transport.hpp"
#include "control.hpp"

namespace gradsync::schedule {

class PeerAbort {
 public:
  /// `t`: a transport that still sends after the synchronizer's own one is cancelled.
  PeerAbort(transport::Transport& t, std::uint64_t session) : t_(t), session_(session) {}

  std::uint64_t session() const { return session_; }

  /// Sends every peer `error`'s text (best effort: a peer may be gone already).
  void tell(std::exception_ptr error) {
    std::string text = "unknown error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      text = e.what();
    } catch (...) {
    }
    Message m{session_, {}};
    const std::size_t n = text.copy(m.text, sizeof m.text);
    const auto bytes = std::as_bytes(std::span(&m, 1)).first(sizeof m.session + n);
    for (int p = 0; p < t_.size(); ++p) {
      if (p == t_.rank()) continue;
      try {
        t_.send(p, transport::abort_tag, bytes);
      } catch (...) {
      }
    }
  }

  /// Polls the peers until one reports a failure (returns it as a PeerError naming that rank) or
  /// `control` stops (returns null).
  std::exception_ptr watch(Control& control) {
    Message m;
    while (!control.stopping()) {
      for (int p = 0; p < t_.size(); ++p) {
        if (p == t_.rank()) continue;
        const auto got = t_.try_recv(p, transport::abort_tag, std::as_writable_bytes(std::span(&m, 1)));
        if (!got || *got < sizeof m.session || m.session != session_) continue;  // none, or a stale one
        return std::make_exception_ptr(
            PeerError("gradsync: rank " + std::to_string(p) + " failed: " + std::string(m.text, *got - sizeof m.session)));
      }
      control.wait_for(transport::Cancellable::slice, [] { return false; });
    }
    return nullptr;
  }

 private:
  struct Message {
    std::uint64_t session = 0;
    char text[1000];
  };
  transport::Transport& t_;
  std::uint64_t session_;
};

}  // namespace gradsync::schedule
