#pragma once
/// Errors gradsync throws. Every message names the bad input and what to do instead.
#include <exception>
#include <stdexcept>
#include <string>

namespace gradsync {

/// Misuse of the API (wrong sizes, ids, order of calls). Fix the calling code.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// A policy string or option that cannot be parsed ("fixed:abc", "rign").
struct ConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// A payload that fails validation: truncated, oversized, wrong codec, corrupt header.
struct WireError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Ranks disagree (model layout, policies, world size) or a peer failed or timed out.
struct PeerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A wait for rank `peer` that ran out of time: that rank died, its link is down, or it is slow -
/// or it is itself waiting for another (schedule::Watchdog finds which).
struct PeerTimeout : PeerError {
  PeerTimeout(const std::string& what, int peer) : PeerError(what), peer(peer) {}
  int peer;
};

/// The rank `error` timed out waiting for, if it is a PeerTimeout; else -1.
inline int timed_out_on(const std::exception_ptr& error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const PeerTimeout& e) {
    return e.peer;
  } catch (...) {
  }
  return -1;
}

}  // namespace gradsync
