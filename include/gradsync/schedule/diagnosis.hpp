#pragma once
/// Diagnosis: whom a rank that timed out blames, and the error that says so. The watchdog
/// (watchdog.hpp) asks every peer whom it waits for; an Inquiry keeps the answers to that
/// question, and its verdict turns them into the error.
///
/// A timeout names only the rank waited for, which may itself be waiting: in a ring, when rank 2
/// dies, rank 0 waits for rank 2 and rank 1 for rank 0, and both time out at about the same time.
/// So the chain of waits is followed through the answers (blame()):
///  - a peer that did not answer is gone (it died, or its network is down). The verdict names the
///    silent ranks that this rank's waits lead to through the answers, or every silent rank where
///    the chain breaks (a rank asked between two waits);
///  - if every peer answered, the chain of waits from this rank ends at a rank that waits for no
///    peer: it is alive and stopped handing over gradients (its training loop is stuck or slower
///    than the timeout). A chain that loops (every rank waits for another) blames nobody: the
///    timeout's own message stands.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "../core/error.hpp"

namespace gradsync::schedule {

namespace detail {

/// Whom a diagnosis blames, from this rank's waits and the peers' answers.
struct Blame {
  enum class Kind { none, silent, idle };
  Kind kind = Kind::none;
  std::vector<int> ranks;    ///< silent: the ranks blamed; idle: the rank at the chain's end
  std::vector<int> waiters;  ///< silent: the ranks known to wait for them; idle: the ranks between
};

/// `mine`: the peers rank `self` waits for, the longest-waited first; answers[p]: the peers rank p
/// said it waits for, alike (nullopt: p did not answer; answers[self] is not read).
inline Blame blame(int self, const std::vector<int>& mine, const std::vector<std::optional<std::vector<int>>>& answers) {
  const int n = static_cast<int>(answers.size());
  const auto answered = [&](int r) { return r == self || answers[r].has_value(); };
  const auto edges = [&](int r) -> const std::vector<int>& { return r == self ? mine : *answers[r]; };
  // Breadth first from this rank along the waits, remembering who led where.
  std::vector<int> order{self}, parent(n, -1);
  std::vector<char> seen(n, 0);
  seen[self] = 1;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!answered(order[i])) continue;  // silent: whom it waits for is unknown
    for (int p : edges(order[i]))
      if (p >= 0 && p < n && !seen[p]) {
        seen[p] = 1;
        parent[p] = order[i];
        order.push_back(p);
      }
  }
  Blame b;
  for (int r : order)
    if (!answered(r)) b.ranks.push_back(r);
  if (b.ranks.empty())  // silent ranks the waits do not lead to (the chain broke): still the likeliest
    for (int r = 0; r < n; ++r)
      if (!answered(r)) b.ranks.push_back(r);
  if (!b.ranks.empty()) {
    b.kind = Blame::Kind::silent;
    std::ranges::sort(b.ranks);
    for (int r = 0; r < n; ++r)
      if (answered(r) && std::ranges::any_of(edges(r), [&](int p) { return std::ranges::binary_search(b.ranks, p); }))
        b.waiters.push_back(r);
    return b;
  }
  for (int r : order)
    if (r != self && edges(r).empty()) {
      b.kind = Blame::Kind::idle;
      b.ranks = {r};
      for (int p = parent[r]; p != self; p = parent[p]) b.waiters.insert(b.waiters.begin(), p);
      return b;
    }
  return b;
}

/// "rank 2" or "ranks 1, 2".
inline std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace detail

/// What started a diagnosis: a PeerTimeout, or the caller's wait `who`(`index`).
struct Trigger {
  std::exception_ptr error;
  const char* who = nullptr;
  std::size_t index = 0;
};

/// One rank's question to its peers, whom each waits for: the answers of the round open now, and
/// the error they lead to. One thread's (the watchdog's).
class Inquiry {
 public:
  /// `timeout`: what the waits lasted; `grace`: how long the peers have to answer (both for the errors).
  Inquiry(int rank, int size, std::chrono::milliseconds timeout, std::chrono::milliseconds grace)
      : rank_(rank), size_(size), timeout_(timeout), grace_(grace) {}

  /// A new round: the question asked again, earlier answers void.
  void open() {
    ++round_;
    answers_.assign(static_cast<std::size_t>(size_), std::nullopt);
    open_ = true;
  }
  /// No more answers are taken.
  void close() { open_ = false; }
  std::int32_t round() const { return round_; }
  /// `peer`'s answer to question `round`; one to another question, or once closed, is dropped.
  void take(int peer, std::int32_t round, std::vector<int> ranks) {
    if (open_ && round == round_) answers_[peer] = std::move(ranks);
  }
  /// Whether every peer answered.
  bool complete() const {
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && !answers_[p]) return false;
    return true;
  }

  /// The error the diagnosis ends with; `mine`: the peers this rank waits for, the longest-waited
  /// first; `me`: this rank's transport, described.
  std::exception_ptr verdict(const std::vector<int>& mine, const Trigger& trigger, const std::string& me) const {
    const detail::Blame b = detail::blame(rank_, mine, answers_);
    const std::string waited = " waited " + std::to_string(timeout_.count()) + " ms";
    if (b.kind == detail::Blame::Kind::silent) return silent(b);
    if (b.kind == detail::Blame::Kind::idle) {
      const int r = b.ranks.front();
      return std::make_exception_ptr(PeerTimeout(
          "gradsync: " + me + waited + " for rank " + std::to_string(r) +
              (b.waiters.empty() ? "" : " (through " + detail::ranks_text(b.waiters) + ")") +
              ", which answers but waits for no peer: it stopped handing over gradients (its training loop is stuck, "
              "or slower than Options::timeout: raise it if that rank is only slow)",
          r));
    }
    if (trigger.error) return trigger.error;
    if (!mine.empty())
      return std::make_exception_ptr(PeerTimeout(
          "gradsync: " + me + waited + " for rank " + std::to_string(mine.front()) +
              ", and every rank answers that it waits for another: a link or a rank is slower than Options::timeout "
              "(raise it if so), or the ranks hand over different layers",
          mine.front()));
    return std::make_exception_ptr(PeerError(
        "gradsync: " + std::string(trigger.who) + "(" + std::to_string(trigger.index) + "): not aggregated after " +
        std::to_string(timeout_.count()) + " ms on " + me + ", and this rank waits for no peer: a peer did not hand "
        "over this layer or is slower than Options::timeout; raise it if a peer is only slow"));
  }

 private:
  /// The verdict on ranks that did not answer.
  std::exception_ptr silent(const detail::Blame& b) const {
    const bool one = b.ranks.size() == 1;
    std::string why = b.waiters.empty() ? "" : detail::ranks_text(b.waiters) + (b.waiters.size() == 1 ? " waits" : " wait") + " for " + (one ? "it" : "them") + ", and ";
    why += (one ? "it" : "they") + std::string(" did not answer within ") + std::to_string(grace_.count()) + " ms";
    const auto silent = std::ranges::count_if(answers_, [](const auto& a) { return !a; }) - 1;  // less this rank's slot
    if (size_ > 2 && silent == size_ - 1) why += "; no peer answered: the network of this rank may be down";
    return std::make_exception_ptr(PeerError(
        "gradsync: " + detail::ranks_text(b.ranks) + " stopped answering: " + (one ? "it" : "they") + " died or " +
        (one ? "its" : "their") + " network is down (" + why + "; seen from rank " + std::to_string(rank_) + " of " +
        std::to_string(size_) + "): restart from the last checkpoint once that node is back, or without it"));
  }

  int rank_, size_;
  std::chrono::milliseconds timeout_, grace_;
  std::int32_t round_ = 0;
  bool open_ = false;
  std::vector<std::optional<std::vector<int>>> answers_;
};

}  // namespace gradsync::schedule
