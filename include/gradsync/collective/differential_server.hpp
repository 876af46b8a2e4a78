#pragma once
/// A DGT server's side of one unit (collective::DifferentialPs, differential_ps.hpp). Its thread
/// (collective::Server) collects every worker's important push and the datagrams that arrive
/// before the last of those pushes, which is the deadline: later pieces are dropped and stay in
/// their sender's residual. Its own unimportant piece joins the aggregate only where some worker's
/// did, so each piece of the aggregate holds every rank's share or none, and the broadcast carries
/// only the pieces that hold anything.
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
#include "server.hpp"

namespace gradsync::collective::detail {

/// The server's side of a DGT unit: every worker's important push (with its block magnitudes and
/// loss ratio), and the pieces that arrive before the last of them.
struct DifferentialCollecting final : Served {
  DifferentialCollecting(transport::Transport& t, DifferentialTransfer& unit, std::size_t block, DatagramRouter& router)
      : Served(t, unit.job.tag, unit.job.priority), unit(unit), job(unit.job), router(router),
        pieces(job.data.size(), block),
        taken(static_cast<std::size_t>(t.size()), std::vector<std::uint8_t>(pieces.count, 0)),
        stage(static_cast<std::size_t>(t.size()), std::vector<float>(job.data.size(), 0.0f)),
        reported(static_cast<std::size_t>(t.size())),
        pushed(static_cast<std::size_t>(t.size()), 0),
        inbox{static_cast<std::int64_t>(job.ctx.iteration), job.tag, &pieces, unit.important, &taken, &stage} {
    pushed[static_cast<std::size_t>(t.rank())] = 1;
    for (std::size_t k = 0; k < pieces.count; ++k)
      if (unit.important[pieces.block_of(k)]) important_elements += pieces.range(k).second - pieces.range(k).first;
  }
  bool poll() override {
    if (!opened) {  // on the server's thread: the router is its alone
      router.open(inbox);
      opened = true;
    }
    router.pump();
    const std::size_t blocks = unit.magnitudes.size(), expected = 4 * (important_elements + blocks + 1);
    in.resize(important_elements + blocks + 1);
    for (int w = 0; w < t_.size(); ++w) {
      if (pushed[static_cast<std::size_t>(w)]) continue;
      const auto got = t_.try_recv(w, tag_, std::as_writable_bytes(std::span(in)));
      if (!got) continue;
      if (*got != expected)
        throw WireError("gradsync: differential push of " + std::to_string(*got) + " bytes from rank " +
                        std::to_string(w) + ", expected " + std::to_string(expected) +
                        " (ranks disagree on the classification: same dgt knobs on every rank?)");
      reported[static_cast<std::size_t>(w)].assign(in.end() - static_cast<std::ptrdiff_t>(blocks + 1), in.end() - 1);
      if (w == 0) unit.ratio = in.back();
      std::size_t at = 0;
      for (std::size_t k = 0; k < pieces.count; ++k) {
        const auto [first, last] = pieces.range(k);
        if (first == last || !unit.important[pieces.block_of(k)]) continue;
        std::copy(in.begin() + at, in.begin() + at + (last - first), stage[static_cast<std::size_t>(w)].begin() + first);
        at += last - first;
      }
      pushed[static_cast<std::size_t>(w)] = 1;
      progressed();
    }
    if (std::ranges::find(pushed, 0) != pushed.end()) return false;
    router.pump();        // what arrived with the last push, which came after it
    router.close(inbox);  // the deadline: the last important push is in
    rejected = router.take_rejected();
    return true;
  }
  int missing() const override { return static_cast<int>(std::ranges::find(pushed, 0) - pushed.begin()); }
  void serve() override {
    const int n = t_.size(), r = t_.rank();
    const std::span<float> v = job.data, e = job.ctx.residual;
    // This rank's own: important pieces all, unimportant ones where some worker's arrived too;
    // the rest waits in the residual, as a worker's late datagram does.
    auto& own = taken[static_cast<std::size_t>(r)];
    dropped_block.assign(unit.important.size(), 0);
    for (std::size_t k = 0; k < pieces.count; ++k) {
      const auto [first, last] = pieces.range(k);
      if (first == last) continue;
      bool kept = unit.important[pieces.block_of(k)] != 0;
      if (!kept) {
        for (int w = 0; w < n; ++w) kept = kept || (w != r && taken[static_cast<std::size_t>(w)][k]);
        own[k] = kept;
        dropped_block[pieces.block_of(k)] |= !kept;
      }
      for (std::size_t i = first; i < last; ++i) {
        if (kept) v[i] += e[i], e[i] = 0.0f;
        else e[i] += v[i], v[i] = 0.0f;
      }
    }
    for (int w = 0; w < n; ++w)  // rank order: reproducible sums
      if (w != r)
        for (std::size_t i = 0; i < v.size(); ++i) v[i] += stage[static_cast<std::size_t>(w)][i];
    finish_mean(v, job.average, n);
    std::vector<float>& magnitudes = unit.magnitudes;
    reported[static_cast<std::size_t>(r)].assign(magnitudes.begin(), magnitudes.end());
    for (std::size_t j = 0; j < magnitudes.size(); ++j) {
      float sum = 0;
      for (const auto& m : reported) sum += m[j];
      magnitudes[j] = sum / static_cast<float>(n);
    }
    const Broadcast b(pieces, unit.important, n);
    std::vector<std::byte> out(b.head);
    std::memcpy(out.data() + b.maps, magnitudes.data(), 4 * magnitudes.size());
    std::memcpy(out.data() + b.head - 4, &unit.ratio, 4);  // rank 0's: its push's, or this rank's own
    for (int w = 0; w < n; ++w)
      for (std::size_t k = 0; k < pieces.count; ++k)
        if (taken[static_cast<std::size_t>(w)][k]) out[b.row * static_cast<std::size_t>(w) + k / 8] |= std::byte(1u << (k % 8));
    out.resize(b.bytes(out.data() + b.row * static_cast<std::size_t>(r)));
    std::size_t at = b.head;
    b.each(out.data() + b.row * static_cast<std::size_t>(r), [&](std::size_t first, std::size_t last, bool carried) {
      if (!carried) return;
      std::memcpy(out.data() + at, v.data() + first, 4 * (last - first));
      at += 4 * (last - first);
    });
    for (int w = 0; w < n; ++w)
      if (w != r) t_.send(w, tag_, out);
    sent = out.size() * static_cast<std::size_t>(n - 1);
  }

  DifferentialTransfer& unit;
  Job& job;
  DatagramRouter& router;
  Pieces pieces;
  std::vector<std::vector<std::uint8_t>> taken;
  std::vector<std::vector<float>> stage;
  std::vector<std::vector<float>> reported;  // [rank][block]: the magnitudes each rank pushed
  std::vector<std::uint8_t> pushed;
  std::vector<std::uint8_t> dropped_block;  // per block: some piece of this rank's own left out
  Inbox inbox;
  std::vector<float> in;
  std::size_t important_elements = 0, sent = 0;
  std::uint64_t rejected = 0;
  bool opened = false;
};

/// Hands the unit to this rank's server thread and waits until it is served. Returns the bytes sent.
inline std::size_t differential_serve(transport::Transport& t, DifferentialTransfer& unit, DifferentialState& s,
                                      std::size_t block) {
  DifferentialCollecting c(t, unit, block, s.router);
  s.server.serve(c);
  unit.counts.rejected += c.rejected;
  unit.count_dropped(c.dropped_block);
  return c.sent;
}

}  // namespace gradsync::collective::detail
