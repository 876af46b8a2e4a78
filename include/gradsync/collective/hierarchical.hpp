#pragma once
/// Hierarchical (ImageNet in 4 minutes, section 4.3): ranks form groups of k consecutive ranks
/// (the last group may be smaller when k does not divide N). Three phases: every member sends its
/// unit to the group's leader (its first rank), which adds them up; the leaders run a Ring among
/// themselves; each leader hands the result to its members (the ring's all-gather messages, as
/// they pass: no re-encode). 2(k-1) messages inside a group and 2(N/k-1) ring steps, instead of
/// 2(N-1) ring steps: fewer latencies for small units, more bytes through the leaders for large
/// ones (see Hybrid). A lossy codec touches a member's element three times with more than one
/// group (the member's push, the leader's group sum, the owning leader's aggregate; a leader's own
/// element twice; with one group twice), a fixed count whatever N, each with error feedback when
/// the codec keeps a residual.
///
/// \code
///   using Sync = gradsync::Synchronizer<..., gradsync::collective::Hierarchical>;
///   Sync sync{transport, layout, {}, {.collective = {.group = 4}}};   // or AnyCollective::parse("hierarchical:4")
/// \endcode
#include <algorithm>
#include <cmath>

#include "concept.hpp"
#include "ring.hpp"
#include "wire.hpp"

namespace gradsync::collective {

namespace detail {
/// The group leaders (ranks 0, k, 2k, ...) of `parent`, seen as a transport of their own, so the
/// leaders' phase reuses Ring unchanged. Pure arithmetic: no allocation per unit.
class Leaders final : public transport::Transport {
 public:
  Leaders(transport::Transport& parent, int group)
      : parent_(parent), k_(group), n_((parent.size() + group - 1) / group) {}
  int rank() const override { return parent_.rank() / k_; }
  int size() const override { return n_; }
  std::string describe() const override { return parent_.describe() + " (leader " + std::to_string(rank()) + ")"; }
  std::chrono::milliseconds timeout() const override { return parent_.timeout(); }
  void send(int dst, transport::Tag tag, std::span<const std::byte> data) override { parent_.send(real(dst), tag, data); }
  SendId send_async(int dst, transport::Tag tag, std::span<const std::byte> data) override {
    return parent_.send_async(real(dst), tag, data);
  }
  void wait_sent(SendId id) override { parent_.wait_sent(id); }
  bool test_sent(SendId id) override { return parent_.test_sent(id); }
  bool wait_sent_for(SendId id, std::chrono::milliseconds wait) override { return parent_.wait_sent_for(id, wait); }
  std::optional<std::size_t> recv_for(int src, transport::Tag tag, std::span<std::byte> out,
                                      std::chrono::milliseconds wait) override {
    return parent_.recv_for(real(src), tag, out, wait);
  }
  std::optional<std::size_t> try_recv(int src, transport::Tag tag, std::span<std::byte> out) override {
    return parent_.try_recv(real(src), tag, out);
  }
  transport::PostedRecv post_recv(int src, transport::Tag tag, std::span<std::byte> out) override {
    return parent_.post_recv(real(src), tag, out);  // the parent's from here on
  }
  std::optional<std::size_t> wait_recv(transport::PostedRecv& r, std::chrono::milliseconds wait) override {
    return parent_.wait_recv(r, wait);
  }
  void unpost_recv(transport::PostedRecv& r) noexcept override { parent_.unpost_recv(r); }

 private:
  int real(int leader) const {
    check_peer(leader);
    return leader * k_;
  }
  transport::Transport& parent_;
  int k_, n_;
};
}  // namespace detail

struct Hierarchical {
  /// Ranks per group; 0 picks round(sqrt(N/2)) (at least 2), which minimises the step count
  /// 4(k-1) + 2(N/k-1) of the paper's model. 1 is a plain ring; k >= N is reduce to rank 0 and
  /// broadcast.
  int group = 0;
  /// Units only through the codec (device codecs too).
  static constexpr Traits traits() { return {.through_codec = true}; }

  std::string_view name() const { return "hierarchical"; }
  /// "hierarchical:k" ("hierarchical" for the automatic size), as in AnyCollective::parse.
  std::string describe() const { return group > 0 ? "hierarchical:" + std::to_string(group) : "hierarchical"; }

  /// The group size used on `ranks` ranks.
  int group_size(int ranks) const {
    if (group < 0) throw UsageError("gradsync: Hierarchical::group must be >= 0 (0 = automatic)");
    const int k = group > 0 ? group : std::max(2, static_cast<int>(std::lround(std::sqrt(ranks / 2.0))));
    return std::clamp(k, 1, std::max(ranks, 1));
  }

  template <codec::Codec C>
  std::size_t run(transport::Transport& t, const C& codec, Job& job, Workspace& ws) const {
    const int n = t.size(), r = t.rank(), k = group_size(n);
    if (n == 1) return 0;  // the unit already is the sum and the mean
    if (k == 1) return Ring{}.run(t, codec, job, ws);
    const int leader = r / k * k, end = std::min(leader + k, n), groups = (n + k - 1) / k;
    detail::Wire<C> w{t, codec, ws, job};
    constexpr int phase = 0x8000;  // RNG streams apart from the leaders' ring steps

    if (r != leader) {
      const auto out = w.encode(job.data, detail::stream(r, phase));
      t.send(leader, job.tag, out);
      if (groups == 1) {
        w.recv_decode(leader, job.data);
      } else {
        Ring{}.receive_gathered(t, codec, job, ws, leader, leader / k, groups);
        detail::finish_mean(job.data, job.average, n, codec);
      }
      return out.size();
    }
    for (int m = leader + 1; m < end; ++m) w.recv_add(m, job.data);
    if (groups == 1) {
      detail::finish_mean(job.data, job.average, n, codec);
      const auto out = w.encode_final(job.data, detail::stream(r, phase + 1));
      for (int m = leader + 1; m < end; ++m) t.send(m, job.tag, out);
      return out.size() * static_cast<std::size_t>(end - leader - 1);
    }
    // The leaders' ring sums the group sums; its all-gather messages also go to this group's
    // members, so they decode the very bytes the leaders do.
    detail::Leaders leaders(t, k);
    Job sum{job.data, job.tag, job.ctx, false, job.sequence};
    const std::size_t sent = Ring{}.run(leaders, codec, sum, ws, {&t, leader + 1, end - leader - 1});
    detail::finish_mean(job.data, job.average, n, codec);
    return sent;
  }
};
GRADSYNC_CHECK_COLLECTIVE(Hierarchical);

}  // namespace gradsync::collective
