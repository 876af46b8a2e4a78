#pragma once
/// Rank 0's bytes to every rank and every rank's bytes to rank 0, with plain sends over any
/// Transport on one tag: what set-up protocols say before (or beside) a Synchronizer - the
/// handshake's hellos and verdict, the PyTorch adapter's weights and model checks, the link
/// tuner's choice. Messages carry their size first and travel in pieces of at most 4 MiB, so no
/// transport sees a larger message, and a chain of ranks forwards one piece while the next arrives.
///
/// \code
///   auto all = transport::gather(t, tag, mine, 16 * 1024);  // on rank 0: every rank's, by rank
///   transport::broadcast(t, tag, verdict, 64 * 1024);       // every rank now holds rank 0's
///   transport::broadcast_value(t, tag, choice);             // a trivially copyable value
/// \endcode
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "transport.hpp"

namespace gradsync::transport {

namespace detail {

inline constexpr std::size_t piece_bytes = 4u << 20;

inline void send_sized(Transport& t, int dst, Tag tag, std::span<const std::byte> data) {
  const std::uint64_t n = data.size();
  t.send(dst, tag, std::as_bytes(std::span(&n, 1)));
  for (std::size_t at = 0; at < data.size(); at += piece_bytes)
    t.send(dst, tag, data.subspan(at, std::min(piece_bytes, data.size() - at)));
}

/// A message of at most `max_bytes` (a larger size is a peer that runs another protocol).
inline std::vector<std::byte> recv_sized(Transport& t, int src, Tag tag, std::size_t max_bytes) {
  std::uint64_t n = 0;
  if (t.recv(src, tag, std::as_writable_bytes(std::span(&n, 1))) != sizeof n || n > max_bytes)
    throw PeerError("gradsync: " + t.describe() + ": a malformed set-up message from rank " + std::to_string(src) +
                    " (do all ranks run the same gradsync?)");
  std::vector<std::byte> out(n);
  for (std::size_t at = 0; at < out.size(); at += piece_bytes) {
    const std::size_t len = std::min(piece_bytes, out.size() - at);
    if (t.recv(src, tag, std::span(out).subspan(at, len)) != len)
      throw PeerError("gradsync: " + t.describe() + ": a short set-up message from rank " + std::to_string(src));
  }
  return out;
}

}  // namespace detail

/// Every rank's `bytes` become rank 0's (any size up to `max_bytes`). Rank r receives from r - 1
/// and forwards to r + 1 piece by piece: rank 0's link carries the data once, whatever the ranks.
inline void broadcast(Transport& t, Tag tag, std::vector<std::byte>& bytes, std::size_t max_bytes) {
  const int r = t.rank(), next = r + 1 < t.size() ? r + 1 : -1;
  if (r > 0) bytes = detail::recv_sized(t, r - 1, tag, max_bytes);
  if (next >= 0) detail::send_sized(t, next, tag, bytes);
}

/// Rank 0's `data` into every rank's `data`, which must have the same size on every rank (the
/// caller checked the ranks agree); no copy besides the transport's.
inline void broadcast_into(Transport& t, Tag tag, std::span<std::byte> data) {
  const int r = t.rank(), next = r + 1 < t.size() ? r + 1 : -1;
  for (std::size_t at = 0; at < data.size(); at += detail::piece_bytes) {
    const auto piece = data.subspan(at, std::min(detail::piece_bytes, data.size() - at));
    if (r > 0 && t.recv(r - 1, tag, piece) != piece.size())
      throw PeerError("gradsync: " + t.describe() + ": rank " + std::to_string(r - 1) +
                      " sent a piece of another size (do the ranks' models differ?)");
    if (next >= 0) t.send(next, tag, piece);
  }
}

/// Every rank's `value` becomes rank 0's.
template <class T>
void broadcast_value(Transport& t, Tag tag, T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  broadcast_into(t, tag, std::as_writable_bytes(std::span(&value, 1)));
}

/// On rank 0: every rank's `mine` (at most `max_bytes` each), by rank (rank 0's own first).
/// Elsewhere: empty, after sending.
inline std::vector<std::vector<std::byte>> gather(Transport& t, Tag tag, std::span<const std::byte> mine,
                                                  std::size_t max_bytes) {
  if (t.rank() != 0) {
    detail::send_sized(t, 0, tag, mine);
    return {};
  }
  std::vector<std::vector<std::byte>> all{{mine.begin(), mine.end()}};
  for (int src = 1; src < t.size(); ++src) all.push_back(detail::recv_sized(t, src, tag, max_bytes));
  return all;
}

}  // namespace gradsync::transport
