#pragma once
// Test support: a transport that forwards everything to another one. Test transports derive from
// it and override only what they change (a gate, a wrong world size, a span called GPU memory).
#include <gradsync/transport/transport.hpp>

namespace testing {

class Forwarding : public gradsync::transport::Transport {
 public:
  explicit Forwarding(Transport& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string describe() const override { return inner_.describe(); }
  std::chrono::milliseconds timeout() const override { return inner_.timeout(); }
  bool device_memory(const void* p) const override { return inner_.device_memory(p); }
  void send(int dst, gradsync::transport::Tag tag, std::span<const std::byte> data) override {
    inner_.send(dst, tag, data);
  }
  // send_async keeps the default (send, which a test transport may override); native() finds inner
  Transport* wrapped() override { return &inner_; }
  std::optional<std::size_t> recv_for(int src, gradsync::transport::Tag tag, std::span<std::byte> out,
                                      std::chrono::milliseconds wait) override {
    return inner_.recv_for(src, tag, out, wait);
  }
  std::optional<std::size_t> try_recv(int src, gradsync::transport::Tag tag, std::span<std::byte> out) override {
    return inner_.try_recv(src, tag, out);
  }

 protected:
  Transport& inner_;
};

}  // namespace testing
