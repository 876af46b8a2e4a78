#pragma once
// Test support: in-process ranks whose send_async copies nothing. The receiver reads the sender's
// memory when it receives (as MPI's rendezvous protocol does for large messages) and wait_sent
// blocks until then, so a collective that writes a buffer still being sent delivers wrong data,
// which the reference checks catch. send() stays buffered (a copy), as every Transport's.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/transport/transport.hpp>

namespace testing {

class RendezvousGroup {
 public:
  explicit RendezvousGroup(int size, std::chrono::milliseconds timeout = std::chrono::seconds(20))
      : timeout_(timeout), inbox_(static_cast<std::size_t>(size)), arrived_(static_cast<std::size_t>(size)),
        taken_(static_cast<std::size_t>(size)) {
    for (int r = 0; r < size; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
  }
  gradsync::transport::Transport& rank(int r) { return *endpoints_.at(static_cast<std::size_t>(r)); }
  int size() const { return static_cast<int>(endpoints_.size()); }
  /// Messages sent with send_async, over the group's life.
  std::uint64_t async_sends() const {
    std::lock_guard lock(mutex_);
    return next_id_;
  }

 private:
  using Tag = gradsync::transport::Tag;
  struct Message {
    int src;
    Tag tag;
    std::vector<std::byte> copy;          // send(): buffered
    std::span<const std::byte> live;      // send_async(): the sender's own memory
    gradsync::transport::Transport::SendId id = 0;
  };

  class Endpoint final : public gradsync::transport::Transport {
   public:
    Endpoint(RendezvousGroup& g, int rank) : g_(g), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return g_.size(); }
    std::chrono::milliseconds timeout() const override { return g_.timeout_; }
    std::string describe() const override { return "rendezvous rank " + std::to_string(rank_); }

    void send(int dst, Tag tag, std::span<const std::byte> data) override {
      check_peer(dst);
      post(dst, {rank_, tag, std::vector<std::byte>(data.begin(), data.end()), {}, 0});
    }
    SendId send_async(int dst, Tag tag, std::span<const std::byte> data) override {
      check_peer(dst);
      SendId id;
      {
        std::lock_guard lock(g_.mutex_);
        id = ++g_.next_id_;
      }
      post(dst, {rank_, tag, {}, data, id});
      return id;
    }
    void wait_sent(SendId id) override {
      if (!wait_sent_for(id, g_.timeout_))
        throw gradsync::PeerError("rendezvous: send " + std::to_string(id) + " never received");
    }
    bool wait_sent_for(SendId id, std::chrono::milliseconds wait) override {
      if (id == 0) return true;
      std::unique_lock lock(g_.mutex_);
      if (!g_.taken_[rank_].wait_for(lock, wait, [&] { return g_.received_.contains(id); })) return false;
      g_.received_.erase(id);
      return true;
    }
    bool test_sent(SendId id) override {
      std::lock_guard lock(g_.mutex_);
      return id == 0 || g_.received_.erase(id) == 1;
    }
    std::optional<std::size_t> recv_for(int src, Tag tag, std::span<std::byte> out,
                                        std::chrono::milliseconds wait) override {
      check_peer(src);
      std::unique_lock lock(g_.mutex_);
      auto& box = g_.inbox_[static_cast<std::size_t>(rank_)];
      auto match = [&] { return std::find_if(box.begin(), box.end(), [&](const Message& m) { return m.src == src && m.tag == tag; }); };
      auto it = box.end();
      if (!g_.arrived_[rank_].wait_for(lock, wait, [&] { return (it = match()) != box.end(); })) return std::nullopt;
      const std::span<const std::byte> bytes = it->id ? it->live : std::span<const std::byte>(it->copy);
      const std::size_t n = bytes.size();
      if (n > out.size()) throw gradsync::WireError("rendezvous: message longer than the receive buffer");
      if (n) std::memcpy(out.data(), bytes.data(), n);  // read now: what the sender holds at this moment
      const bool live = it->id != 0;
      if (live) g_.received_.insert(it->id);
      box.erase(it);
      lock.unlock();
      if (live) g_.taken_[src].notify_all();
      return n;
    }

   private:
    void post(int dst, Message m) {
      {
        std::lock_guard lock(g_.mutex_);
        g_.inbox_[static_cast<std::size_t>(dst)].push_back(std::move(m));
      }
      g_.arrived_[dst].notify_all();
    }
    RendezvousGroup& g_;
    int rank_;
  };

  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;  // one lock for the whole group: a test transport, not a fast one
  std::vector<std::deque<Message>> inbox_;  // per destination, FIFO per (src, tag)
  std::vector<std::condition_variable> arrived_, taken_;  // per rank: a message came / one it sent was read
  std::set<gradsync::transport::Transport::SendId> received_;
  gradsync::transport::Transport::SendId next_id_ = 0;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace testing
