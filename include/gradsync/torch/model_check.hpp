#pragma once
/// check_same_model: every rank describes its model, one line per tensor; rank 0 compares and every
/// rank throws the same PeerError, naming the first rank and tensor that differ, or none does.
/// Earlier and clearer than the Synchronizer's handshake, which can only say that layouts differ.
///
/// \code
///   gradsync::torch::check_same_model(t, {"parameter fc.weight [10, 64] Float", ...});
/// \endcode
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "exchange.hpp"

namespace gradsync::torch {

namespace detail {

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t from = 0; from < text.size();) {
    const std::size_t nl = std::min(text.find('\n', from), text.size());
    lines.push_back(text.substr(from, nl - from));
    from = nl + 1;
  }
  return lines;
}

/// "" when `theirs` (rank `r`'s lines) equals rank 0's `ours`, else what differs first.
inline std::string first_difference(const std::vector<std::string>& ours, const std::vector<std::string>& theirs,
                                    int r) {
  const std::string rank = "rank " + std::to_string(r);
  for (std::size_t i = 0; i < std::max(ours.size(), theirs.size()); ++i) {
    if (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) continue;
    if (i >= theirs.size())
      return rank + " has no " + ours[i] + " (rank 0 has " + std::to_string(ours.size()) + " tensors, " + rank +
             " " + std::to_string(theirs.size()) + ")";
    if (i >= ours.size())
      return rank + " has an extra " + theirs[i] + " (rank 0 has " + std::to_string(ours.size()) + " tensors, " +
             rank + " " + std::to_string(theirs.size()) + ")";
    return rank + " has " + theirs[i] + " where rank 0 has " + ours[i];
  }
  return {};
}

}  // namespace detail

/// Every rank calls it with its own lines, in the same order (e.g. registration order); throws
/// PeerError on every rank when a rank's lines differ from rank 0's.
inline void check_same_model(transport::Transport& t, const std::vector<std::string>& lines) {
  if (t.size() == 1) return;
  std::string mine;
  for (const std::string& l : lines) mine += l + '\n';
  const auto all = gather(t, std::as_bytes(std::span(mine)));
  std::vector<std::byte> verdict;
  if (t.rank() == 0)
    for (int r = 1; r < t.size() && verdict.empty(); ++r)
      if (const std::string d = detail::first_difference(lines, detail::split_lines(to_string(all[r])), r); !d.empty())
        verdict = to_bytes(d);
  broadcast(t, verdict);
  if (!verdict.empty())
    throw PeerError("gradsync: the model differs between ranks: " + to_string(verdict) +
                    "; every rank must build the same model (same code, arguments and dtype)");
}

}  // namespace gradsync::torch
