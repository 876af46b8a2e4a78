#pragma once
/// Differential transmission (DGT, Zhou et al.) on the parameter server: a unit's important blocks
/// (priority::Contribution decides which, the same on every rank) go to the unit's server over the
/// reliable transport; the unimportant ones go best-effort as datagrams of at most 256 elements
/// (transport::BestEffort, UDP marked low-priority), sent first so the network can favour the
/// reliable traffic. The server takes every important block and the unimportant pieces that have
/// arrived by the time the last important push is in. Its own unimportant piece joins the
/// aggregate only where some worker's did, so a piece of the aggregate holds every rank's share or
/// none: the broadcast (bitmaps of the pieces taken, then only the pieces that carry anything)
/// shrinks with the push instead of sending the server's share alone in full.
///
/// Beyond the paper, which discards what misses the deadline, nothing is lost for good. A piece
/// that misses it awaits the server's word in the sender's residual; if it arrives before the
/// unit's next deadline it joins the next aggregate (one iteration late, with the server's own
/// awaiting share of it), else the sender sends it again with its next gradient. On a link whose
/// reliable class is busy until the deadline, most datagrams arrive that way: late, but in time
/// for the next aggregate, without being sent twice. The mean over ranks stays unbiased over time.
///
/// A rank's residual for a DGT unit is twice the unit: what it holds back for its next push, then
/// what it sent best-effort that awaits the server's word (Synchronizer::state() keeps both).
///
/// A datagram that is corrupt (CRC-32), truncated, duplicated, from a rank that is not a peer,
/// of another synchronizer (session), for an iteration or unit the server is not collecting, or
/// later than the unit's next deadline is dropped and counted, never trusted. fp32 only (the
/// pieces are raw floats).
///
/// \code
///   detail::DatagramRouter router(channel, session, ranks, units);   // the server's side
///   router.pump();                                                   // route what has arrived
/// \endcode
#include <boost/crc.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "../transport/datagram.hpp"
#include "concept.hpp"

namespace gradsync::collective::detail {

/// A unit's pieces: blocks of `block` elements, each cut into pieces of up to 256 (one datagram
/// each, under a 1500-byte MTU).
struct Pieces {
  Pieces(std::size_t elements, std::size_t block)
      : n(elements), block(block), size(std::min<std::size_t>(256, block)), per_block((block + size - 1) / size),
        count((elements + block - 1) / block * per_block) {}
  /// Elements [first, last) of piece k (empty past the end of the unit).
  std::pair<std::size_t, std::size_t> range(std::size_t k) const {
    const std::size_t b = k / per_block, first = b * block + (k % per_block) * size;
    const std::size_t last = std::min({first + size, (b + 1) * block, n});
    return {std::min(first, n), std::max(std::min(first, n), last)};
  }
  std::size_t block_of(std::size_t k) const { return k / per_block; }
  std::size_t n, block, size, per_block, count;
};

/// The server's broadcast of a DGT unit: `ranks` bitmaps of `row` bytes, bit k of rank w's telling
/// that the aggregate took w's unimportant piece k on time; as many telling that it took w's piece
/// k of the unit's previous iteration, late; the block magnitudes (collective::Job::magnitudes, a
/// float per block); then the aggregate's pieces that carry anything, in order: the important ones
/// and those where the server took its own share, on time or late, which its bitmaps tell every
/// rank alike.
struct Broadcast {
  Broadcast(const Pieces& pieces, std::span<const std::uint8_t> important, int ranks)
      : pieces(pieces), important(important), ranks(static_cast<std::size_t>(ranks)), row((pieces.count + 7) / 8),
        maps(2 * row * this->ranks), head(maps + 4 * important.size()) {}
  static bool bit(const std::byte* map, std::size_t k) { return (static_cast<unsigned>(map[k / 8]) >> (k % 8)) & 1u; }
  static void set(std::byte* map, std::size_t k) { map[k / 8] |= std::byte(1u << (k % 8)); }
  /// Byte offsets of rank w's bitmaps: pieces taken on time, and late.
  std::size_t on_time(int w) const { return row * static_cast<std::size_t>(w); }
  std::size_t late(int w) const { return row * (ranks + static_cast<std::size_t>(w)); }
  /// f(first, last, carried) for every non-empty piece, `carried`: whether the broadcast whose
  /// bitmaps start at `maps_at` (served by `server`) carries it.
  template <class F>
  void each(const std::byte* maps_at, int server, F&& f) const {
    for (std::size_t k = 0; k < pieces.count; ++k) {
      const auto [first, last] = pieces.range(k);
      if (first != last)
        f(first, last, important[pieces.block_of(k)] != 0 || bit(maps_at + on_time(server), k) || bit(maps_at + late(server), k));
    }
  }
  /// Bytes of the broadcast whose bitmaps start at `maps_at`.
  std::size_t bytes(const std::byte* maps_at, int server) const {
    std::size_t n = head;
    each(maps_at, server, [&](std::size_t first, std::size_t last, bool carried) { n += carried ? 4 * (last - first) : 0; });
    return n;
  }
  const Pieces& pieces;
  std::span<const std::uint8_t> important;  // per block
  std::size_t ranks, row, maps, head;  // bytes: one bitmap, all bitmaps, bitmaps and magnitudes
};

/// What every datagram starts with.
struct PieceHeader {
  static constexpr std::uint32_t magic_value = 0x47534447;  // "GSDG"
  std::uint32_t magic = magic_value;
  std::uint32_t crc = 0;  // CRC-32 of the header (with crc = 0) and the payload
  std::uint64_t session = 0;
  std::int64_t iteration = 0;
  std::uint32_t unit = 0;
  std::uint32_t piece = 0;
  std::uint32_t src = 0;
  std::uint32_t count = 0;  // floats that follow
};
static_assert(sizeof(PieceHeader) == 40);

inline std::uint32_t crc_of(std::span<const std::byte> datagram) {
  boost::crc_32_type crc;
  PieceHeader h;
  std::memcpy(&h, datagram.data(), sizeof h);
  h.crc = 0;
  crc.process_bytes(&h, sizeof h);
  crc.process_bytes(datagram.data() + sizeof h, datagram.size() - sizeof h);
  return crc.checksum();
}

/// One unit at its server, collecting pieces.
struct Inbox {
  std::int64_t iteration = 0;
  std::uint32_t unit = 0;
  const Pieces* pieces = nullptr;
  std::span<const std::uint8_t> important;           // per block
  std::vector<std::vector<std::uint8_t>>* taken;     // [rank][piece]
  std::vector<std::vector<float>>* stage;            // [rank][element]: what each worker sent
};

/// A unit's pieces that missed its deadline at `iteration` and arrived before its next one.
struct Late {
  static constexpr std::uint8_t on_time = 1, arrived = 2;
  std::int64_t iteration = -1;
  Pieces pieces{0, 1};
  std::vector<std::uint8_t> important;           // per block, at `iteration`
  std::vector<std::vector<std::uint8_t>> state;  // [rank][piece]: taken on_time (a late copy repeats it), or arrived
  std::vector<std::vector<float>> stage;         // [rank][element]: what arrived (a rank's row made at its first)
  bool arrived_from(int w, std::size_t k) const { return !state.empty() && state[static_cast<std::size_t>(w)][k] == arrived; }
};

/// The server's side of the best-effort channel: reads datagrams, validates them and hands each
/// piece to the unit collecting it, or, when it missed the unit's deadline, keeps it for the
/// unit's next aggregate. One thread at a time (the server's).
class DatagramRouter {
 public:
  DatagramRouter(transport::BestEffort& channel, std::uint64_t session, int rank, std::size_t units)
      : channel_(channel), session_(session), rank_(rank), closed_(units, -1), open_(units, nullptr), late_(units) {}

  /// `box` collects from now on (pieces that came early are applied).
  void open(Inbox& box) {
    open_.at(box.unit) = &box;
    std::erase_if(early_, [&](const std::vector<std::byte>& d) {
      PieceHeader h;
      std::memcpy(&h, d.data(), sizeof h);
      if (h.unit != box.unit) return false;
      if (h.iteration == box.iteration)
        take(*box.pieces, box.important, (*box.taken)[h.src], (*box.stage)[h.src], h, d, Late::on_time);
      else if (h.iteration < box.iteration) ++rejected_;  // for an iteration that is over
      return h.iteration <= box.iteration;
    });
  }
  /// The deadline: `box` takes nothing more; its pieces that come before the unit's next deadline
  /// are kept for the next aggregate. Returns those of the unit's iteration before `box`'s (none
  /// when the server did not collect that one).
  Late close(const Inbox& box) {
    open_.at(box.unit) = nullptr;
    closed_.at(box.unit) = box.iteration;
    Late previous = std::exchange(
        late_[box.unit], Late{box.iteration, *box.pieces, {box.important.begin(), box.important.end()}, *box.taken,
                              std::vector<std::vector<float>>(box.taken->size())});
    return previous.iteration == box.iteration - 1 ? std::move(previous) : Late{};
  }
  /// Routes every datagram that has arrived.
  void pump() {
    buffer_.resize(sizeof(PieceHeader) + 4 * 1024);
    while (const auto got = channel_.try_recv(buffer_)) {
      const std::span<const std::byte> d(buffer_.data(), std::min(got->bytes, buffer_.size()));
      PieceHeader h;
      if (got->bytes > buffer_.size() || d.size() < sizeof h) {
        ++rejected_;  // truncated or too short
        continue;
      }
      std::memcpy(&h, d.data(), sizeof h);
      if (h.magic != PieceHeader::magic_value || h.session != session_ || got->src < 0 || got->src == rank_ ||
          h.src != static_cast<std::uint32_t>(got->src) || h.unit >= open_.size() ||
          d.size() != sizeof h + 4 * std::size_t{h.count} || crc_of(d) != h.crc || h.iteration < closed_[h.unit]) {
        ++rejected_;  // corrupt, foreign, another synchronizer's, or later than the unit's next deadline
        continue;
      }
      if (Late& late = late_[h.unit]; !late.state.empty() && h.iteration == late.iteration) {
        take(late.pieces, late.important, late.state[h.src], late.stage[h.src], h, d, Late::arrived);
      } else if (Inbox* box = open_[h.unit]; box && box->iteration == h.iteration) {
        take(*box->pieces, box->important, (*box->taken)[h.src], (*box->stage)[h.src], h, d, Late::on_time);
      } else if (early_.size() < max_early) {
        early_.emplace_back(d.begin(), d.end());  // its unit is not collecting yet
      } else {
        ++rejected_;
      }
    }
  }
  /// Datagrams refused since the last call.
  std::uint64_t take_rejected() { return std::exchange(rejected_, 0); }
  std::uint64_t session() const { return session_; }

 private:
  static constexpr std::size_t max_early = 1 << 14;

  /// Piece h.piece into one rank's rows, marked `mark`, unless it is not a piece of an unimportant
  /// block, has the wrong length, or is there already (a late copy of one taken on time too).
  void take(const Pieces& p, std::span<const std::uint8_t> important, std::vector<std::uint8_t>& taken,
            std::vector<float>& stage, const PieceHeader& h, std::span<const std::byte> d, std::uint8_t mark) {
    if (h.piece >= p.count || important[p.block_of(h.piece)] || taken[h.piece]) {
      ++rejected_;
      return;
    }
    const auto [first, last] = p.range(h.piece);
    if (h.count != last - first) {
      ++rejected_;
      return;
    }
    stage.resize(p.n);  // a late row is made at its first piece
    std::memcpy(stage.data() + first, d.data() + sizeof h, 4 * std::size_t{h.count});
    taken[h.piece] = mark;
  }

  transport::BestEffort& channel_;
  std::uint64_t session_;
  int rank_;
  std::vector<std::int64_t> closed_;  // per unit: the last iteration whose deadline passed
  std::vector<Inbox*> open_;          // per unit: the inbox collecting now
  std::vector<Late> late_;            // per unit: what missed its last deadline
  std::vector<std::vector<std::byte>> early_;
  std::vector<std::byte> buffer_;
  std::uint64_t rejected_ = 0;
};

/// A rank's best-effort state, made by ParameterServer::start: the channel and the router.
struct BestEffortState {
  BestEffortState(std::unique_ptr<transport::BestEffort> c, std::uint64_t session, int rank, std::size_t units)
      : channel(std::move(c)), router(*channel, session, rank, units) {}
  std::unique_ptr<transport::BestEffort> channel;
  DatagramRouter router;
};

}  // namespace gradsync::collective::detail
