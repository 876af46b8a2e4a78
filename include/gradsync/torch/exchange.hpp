#pragma once
/// What the PyTorch/LibTorch adapter says between ranks outside a Synchronizer: rank 0's bytes to
/// every rank (the initial weights, the layout order) and every rank's bytes to rank 0 (the model
/// checks), with transport/bootstrap.hpp on a tag of the tools' range, so they never mix with a
/// Synchronizer's traffic on the same transport.
///
/// \code
///   std::vector<std::byte> order = ...;            // meaningful on rank 0
///   gradsync::torch::broadcast(t, order);          // every rank now holds rank 0's bytes
///   gradsync::torch::broadcast_into(t, weights);   // same size on every rank: in place
/// \endcode
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../transport/bootstrap.hpp"
#include "../transport/transport.hpp"

namespace gradsync::torch {

/// The adapter's tag, from the tools' range (sim's link tuning has the first two).
inline constexpr transport::Tag exchange_tag = transport::tool_tags.at(2);

/// The most a rank's exchange message may hold (a model's description; its weights travel with
/// broadcast_into): a larger size is a peer that speaks another protocol.
inline constexpr std::size_t max_exchange_bytes = std::size_t{1} << 32;

/// Every rank's `bytes` become rank 0's (any size).
inline void broadcast(transport::Transport& t, std::vector<std::byte>& bytes) {
  transport::broadcast(t, exchange_tag, bytes, max_exchange_bytes);
}

/// Rank 0's `data` into every rank's `data`, which must have the same size on every rank (the
/// caller checked the ranks agree); no copy besides the transport's.
inline void broadcast_into(transport::Transport& t, std::span<std::byte> data) {
  transport::broadcast_into(t, exchange_tag, data);
}

/// On rank 0: every rank's `mine`, by rank (rank 0's own first). Elsewhere: empty, after sending.
inline std::vector<std::vector<std::byte>> gather(transport::Transport& t, std::span<const std::byte> mine) {
  return transport::gather(t, exchange_tag, mine, max_exchange_bytes);
}

inline std::vector<std::byte> to_bytes(const std::string& s) {
  const auto b = std::as_bytes(std::span(s));
  return {b.begin(), b.end()};
}
inline std::string to_string(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

}  // namespace gradsync::torch
