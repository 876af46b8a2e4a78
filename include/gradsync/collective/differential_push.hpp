#pragma once
/// A DGT worker's side of one unit (collective::DifferentialPs, differential_ps.hpp). The
/// unimportant pieces go first, as datagrams, so the network can favour the reliable push that
/// follows; whatever of them the server's aggregate did not take stays in the residual for the
/// unit's next iteration, so nothing is lost for good.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "concept.hpp"
#include "differential.hpp"
#include "differential_state.hpp"

namespace gradsync::collective::detail {

/// v = gradient + residual; the unimportant pieces of v as datagrams, then the important blocks,
/// the block magnitudes and the loss ratio over the transport to `server`; then the aggregate,
/// the mean magnitudes and rank 0's loss ratio back into the unit, and the residual keeps the
/// pieces the server did not take. Returns the bytes sent.
inline std::size_t differential_push(transport::Transport& t, DifferentialTransfer& unit, Workspace& ws, int server,
                                     DifferentialState& s, std::size_t block) {
  Job& job = unit.job;
  const std::span<float> v = job.data, e = job.ctx.residual;
  const Pieces pieces(v.size(), block);
  auto important = [&](std::size_t k) { return unit.important[pieces.block_of(k)] != 0; };
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += e[i];
  std::size_t sent = 0, packed = 0;
  ws.send.resize(std::max(ws.send.size(), 4 * (v.size() + unit.magnitudes.size() + 1)));
  for (std::size_t k = 0; k < pieces.count; ++k) {
    const auto [first, last] = pieces.range(k);
    if (first == last) continue;
    if (important(k)) {  // packed in order into the reliable push
      std::memcpy(ws.send.data() + 4 * packed, v.data() + first, 4 * (last - first));
      packed += last - first;
      std::fill(e.begin() + first, e.begin() + last, 0.0f);
      continue;
    }
    std::copy(v.begin() + first, v.begin() + last, e.begin() + first);  // kept unless the server takes it
    std::byte datagram[sizeof(PieceHeader) + 4 * 256];
    PieceHeader h{.session = s.router.session(), .iteration = static_cast<std::int64_t>(job.ctx.iteration),
                  .unit = job.tag, .piece = static_cast<std::uint32_t>(k),
                  .src = static_cast<std::uint32_t>(t.rank()), .count = static_cast<std::uint32_t>(last - first)};
    const std::size_t bytes = sizeof h + 4 * (last - first);
    std::memcpy(datagram + sizeof h, v.data() + first, 4 * (last - first));
    std::memcpy(datagram, &h, sizeof h);
    h.crc = crc_of(std::span<const std::byte>(datagram, bytes));
    std::memcpy(datagram, &h, sizeof h);
    s.channel->send(server, std::span<const std::byte>(datagram, bytes));
    sent += bytes;
  }
  std::memcpy(ws.send.data() + 4 * packed, unit.magnitudes.data(), 4 * unit.magnitudes.size());
  packed += unit.magnitudes.size();
  std::memcpy(ws.send.data() + 4 * packed++, &unit.ratio, 4);
  t.send(server, job.tag, std::span<const std::byte>(ws.send).first(4 * packed));
  sent += 4 * packed;
  // Which pieces the aggregate took from each rank, the magnitudes, the ratio, then the pieces it carries.
  const Broadcast b(pieces, unit.important, t.size());
  ws.recv.resize(std::max(ws.recv.size(), b.head + 4 * v.size()));
  const std::size_t got = t.recv(server, job.tag, ws.recv);
  const std::byte* maps = ws.recv.data();
  if (got < b.maps || got != b.bytes(maps + b.row * static_cast<std::size_t>(server)))
    throw WireError("gradsync: " + t.describe() + ": differential aggregate of " + std::to_string(got) +
                    " bytes from rank " + std::to_string(server) + " (ranks disagree on layout, slicing or policies)");
  std::memcpy(unit.magnitudes.data(), ws.recv.data() + b.maps, 4 * unit.magnitudes.size());
  std::memcpy(&unit.ratio, ws.recv.data() + b.head - 4, 4);
  std::size_t at = b.head;
  b.each(maps + b.row * static_cast<std::size_t>(server), [&](std::size_t first, std::size_t last, bool carried) {
    if (!carried) return std::fill(v.begin() + first, v.begin() + last, 0.0f);
    std::memcpy(v.data() + first, ws.recv.data() + at, 4 * (last - first));
    at += 4 * (last - first);
  });
  const std::byte* taken = maps + b.row * static_cast<std::size_t>(t.rank());
  std::vector<std::uint8_t> dropped_block(unit.important.size(), 0);
  for (std::size_t k = 0; k < pieces.count; ++k) {
    const auto [first, last] = pieces.range(k);
    if (first == last || important(k)) continue;
    if (Broadcast::bit(taken, k)) std::fill(e.begin() + first, e.begin() + last, 0.0f);
    else dropped_block[pieces.block_of(k)] = 1;
  }
  unit.count_dropped(dropped_block);
  return sent;
}

}  // namespace gradsync::collective::detail
