#pragma once
/// What the PyTorch/LibTorch adapter says between ranks outside a Synchronizer: rank 0's bytes to
/// every rank (the initial weights, the layout order) and every rank's bytes to rank 0 (the model
/// checks). Plain sends over any Transport, with a tag below gradsync's reserved ones, so they
/// never mix with a Synchronizer's traffic on the same transport.
///
/// \code
///   std::vector<std::byte> order = ...;            // meaningful on rank 0
///   gradsync::torch::broadcast(t, order);          // every rank now holds rank 0's bytes
///   gradsync::torch::broadcast_into(t, weights);   // same size on every rank: in place
/// \endcode
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../transport/transport.hpp"

namespace gradsync::torch {

/// The adapter's tag: below the reserved ones and the trainer's (reserved_tags - 1 and - 2).
inline constexpr transport::Tag exchange_tag = transport::reserved_tags - 3;

namespace detail {

/// Pieces of a large transfer: one message each, so no transport sees a message over 4 MiB and
/// a chain of ranks forwards one piece while the next arrives.
inline constexpr std::size_t piece_bytes = 4u << 20;

inline void send_sized(transport::Transport& t, int dst, std::span<const std::byte> data) {
  const std::uint64_t n = data.size();
  t.send(dst, exchange_tag, std::as_bytes(std::span(&n, 1)));
  for (std::size_t at = 0; at < data.size(); at += piece_bytes)
    t.send(dst, exchange_tag, data.subspan(at, std::min(piece_bytes, data.size() - at)));
}

inline std::vector<std::byte> recv_sized(transport::Transport& t, int src) {
  std::uint64_t n = 0;
  if (t.recv(src, exchange_tag, std::as_writable_bytes(std::span(&n, 1))) != sizeof n)
    throw PeerError("gradsync: " + t.describe() + ": a malformed message from rank " + std::to_string(src) +
                    " (do all ranks run the same gradsync?)");
  std::vector<std::byte> out(n);
  for (std::size_t at = 0; at < out.size(); at += piece_bytes) {
    const std::size_t len = std::min(piece_bytes, out.size() - at);
    if (t.recv(src, exchange_tag, std::span(out).subspan(at, len)) != len)
      throw PeerError("gradsync: " + t.describe() + ": a short message from rank " + std::to_string(src));
  }
  return out;
}

}  // namespace detail

/// Every rank's `bytes` become rank 0's (any size). Rank r receives from r - 1 and forwards to
/// r + 1 piece by piece: rank 0's link carries the data once, whatever the number of ranks.
inline void broadcast(transport::Transport& t, std::vector<std::byte>& bytes) {
  const int r = t.rank(), next = r + 1 < t.size() ? r + 1 : -1;
  if (r > 0) bytes = detail::recv_sized(t, r - 1);
  if (next >= 0) detail::send_sized(t, next, bytes);
}

/// Rank 0's `data` into every rank's `data`, which must have the same size on every rank (the
/// caller checked the ranks agree); no copy besides the transport's.
inline void broadcast_into(transport::Transport& t, std::span<std::byte> data) {
  const int r = t.rank(), next = r + 1 < t.size() ? r + 1 : -1;
  for (std::size_t at = 0; at < data.size(); at += detail::piece_bytes) {
    const auto piece = data.subspan(at, std::min(detail::piece_bytes, data.size() - at));
    if (r > 0 && t.recv(r - 1, exchange_tag, piece) != piece.size())
      throw PeerError("gradsync: " + t.describe() + ": rank " + std::to_string(r - 1) +
                      " sent a piece of another size (do the ranks' models differ?)");
    if (next >= 0) t.send(next, exchange_tag, piece);
  }
}

/// On rank 0: every rank's `mine`, by rank (rank 0's own first). Elsewhere: empty, after sending.
inline std::vector<std::vector<std::byte>> gather(transport::Transport& t, std::span<const std::byte> mine) {
  if (t.rank() != 0) {
    detail::send_sized(t, 0, mine);
    return {};
  }
  std::vector<std::vector<std::byte>> all{{mine.begin(), mine.end()}};
  for (int src = 1; src < t.size(); ++src) all.push_back(detail::recv_sized(t, src));
  return all;
}

inline std::vector<std::byte> to_bytes(const std::string& s) {
  const auto b = std::as_bytes(std::span(s));
  return {b.begin(), b.end()};
}
inline std::string to_string(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

}  // namespace gradsync::torch
