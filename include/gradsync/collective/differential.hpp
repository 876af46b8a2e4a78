#pragma once
/// The wire of differential transmission (collective::DifferentialPs, differential_ps.hpp): a
/// unit's pieces, the datagrams that carry its unimportant ones, the server's router that collects
/// them, and the server's broadcast.
///
/// A datagram that is corrupt (CRC-32), truncated, duplicated, from a rank that is not a peer,
/// of another synchronizer (session), for an iteration or unit the server is not collecting, or
/// late is dropped and counted, never trusted. fp32 only (the pieces are raw floats).
///
/// \code
///   detail::DatagramRouter router(channel, session, ranks, units);   // the server's side
///   router.pump();                                                   // route what has arrived
/// \endcode
#include <boost/crc.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
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

/// The server's broadcast of a DGT unit: `ranks` bitmaps of `row` bytes (bit k of rank w's: the
/// aggregate took w's unimportant piece k), the block magnitudes (a float per block, the mean over
/// ranks), rank 0's loss ratio (a float), then the aggregate's pieces that are in it, in order: the
/// important ones, and the unimportant ones the server took (its own bit set: some worker's
/// arrived), which the server's bitmap tells every rank alike.
struct Broadcast {
  Broadcast(const Pieces& pieces, std::span<const std::uint8_t> important, int ranks)
      : pieces(pieces), important(important), row((pieces.count + 7) / 8), maps(row * static_cast<std::size_t>(ranks)),
        head(maps + 4 * important.size() + 4) {}
  static bool bit(const std::byte* map, std::size_t k) { return (static_cast<unsigned>(map[k / 8]) >> (k % 8)) & 1u; }
  /// f(first, last, carried) for every non-empty piece, `carried`: whether the broadcast carries
  /// it, given the server's bitmap.
  template <class F>
  void each(const std::byte* server_map, F&& f) const {
    for (std::size_t k = 0; k < pieces.count; ++k) {
      const auto [first, last] = pieces.range(k);
      if (first != last) f(first, last, important[pieces.block_of(k)] != 0 || bit(server_map, k));
    }
  }
  /// Bytes of a broadcast whose server's bitmap is `server_map`.
  std::size_t bytes(const std::byte* server_map) const {
    std::size_t n = head;
    each(server_map, [&](std::size_t first, std::size_t last, bool carried) { n += carried ? 4 * (last - first) : 0; });
    return n;
  }
  const Pieces& pieces;
  std::span<const std::uint8_t> important;  // per block
  std::size_t row, maps, head;  // bytes: one bitmap, all bitmaps, bitmaps with magnitudes and ratio
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

/// One DGT unit at its server, collecting pieces.
struct Inbox {
  std::int64_t iteration = 0;
  std::uint32_t unit = 0;
  const Pieces* pieces = nullptr;
  std::span<const std::uint8_t> important;           // per block
  std::vector<std::vector<std::uint8_t>>* taken;     // [rank][piece]
  std::vector<std::vector<float>>* stage;            // [rank][element]: what each worker sent
};

/// The server's side of the best-effort channel: reads datagrams, validates them and hands each
/// piece to the unit collecting it. One thread at a time (the server's).
class DatagramRouter {
 public:
  DatagramRouter(transport::BestEffort& channel, std::uint64_t session, int rank, std::size_t units)
      : channel_(channel), session_(session), rank_(rank), closed_(units, -1), open_(units, nullptr) {}

  /// `box` collects from now on (pieces that came early are applied).
  void open(Inbox& box) {
    open_.at(box.unit) = &box;
    std::erase_if(early_, [&](const std::vector<std::byte>& d) {
      PieceHeader h;
      std::memcpy(&h, d.data(), sizeof h);
      if (h.unit != box.unit) return false;
      if (h.iteration == box.iteration) take(box, h, d);
      else if (h.iteration < box.iteration) ++rejected_;  // for an iteration that is over
      return h.iteration <= box.iteration;
    });
  }
  /// The deadline: `box` takes nothing more; later pieces for it are late.
  void close(const Inbox& box) {
    open_.at(box.unit) = nullptr;
    closed_.at(box.unit) = box.iteration;
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
          d.size() != sizeof h + 4 * std::size_t{h.count} || crc_of(d) != h.crc || h.iteration <= closed_[h.unit]) {
        ++rejected_;  // corrupt, foreign, another synchronizer's, or late
        continue;
      }
      if (Inbox* box = open_[h.unit]; box && box->iteration == h.iteration) {
        take(*box, h, d);
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

  void take(Inbox& box, const PieceHeader& h, std::span<const std::byte> d) {
    const Pieces& p = *box.pieces;
    auto& taken = (*box.taken)[h.src];
    if (h.piece >= p.count || box.important[p.block_of(h.piece)] || taken[h.piece]) {
      ++rejected_;  // not a piece of an unimportant block, or a duplicate
      return;
    }
    const auto [first, last] = p.range(h.piece);
    if (h.count != last - first) {
      ++rejected_;
      return;
    }
    std::memcpy((*box.stage)[h.src].data() + first, d.data() + sizeof h, 4 * std::size_t{h.count});
    taken[h.piece] = 1;
  }

  transport::BestEffort& channel_;
  std::uint64_t session_;
  int rank_;
  std::vector<std::int64_t> closed_;  // per unit: the last iteration whose deadline passed
  std::vector<Inbox*> open_;          // per unit: the inbox collecting now
  std::vector<std::vector<std::byte>> early_;
  std::vector<std::byte> buffer_;
  std::uint64_t rejected_ = 0;
};

}  // namespace gradsync::collective::detail
