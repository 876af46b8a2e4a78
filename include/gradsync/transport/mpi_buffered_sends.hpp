#pragma once
/// MpiBufferedSends: transport::Mpi's `send`, which returns at once and lets the caller reuse its
/// bytes: each message is copied into a pooled buffer and sent from there, and the buffer goes back
/// to the pool once MPI is done with it (no allocation once the pool is warm).
#include <mpi.h>

#include <chrono>
#include <mutex>
#include <span>
#include <vector>

#include "../detail/backoff.hpp"

namespace gradsync::transport::detail {

class MpiBufferedSends {
 public:
  /// Starts sending a copy of `data`; the MPI return code of MPI_Isend.
  int start(std::span<const std::byte> data, int count, int dst, int tag, MPI_Comm comm) {
    reap();
    std::vector<std::byte> bytes = take_buffer();
    bytes.assign(data.begin(), data.end());
    MPI_Request req;
    const int rc = MPI_Isend(bytes.data(), count, MPI_BYTE, dst, tag, comm, &req);
    if (rc != MPI_SUCCESS) return rc;
    std::lock_guard lock(mutex_);
    in_flight_.push_back({req, std::move(bytes)});
    return rc;
  }

  /// Lets the sends in flight drain until `deadline` (peers may still be receiving); true when
  /// all did. Those left are freed, their buffers kept until the process exits (MPI may still
  /// read them, and it delivers freed requests on its own).
  bool drain(std::chrono::steady_clock::time_point deadline) {
    gradsync::detail::Backoff backoff;
    while (!reap() && std::chrono::steady_clock::now() < deadline) backoff.pause();
    std::lock_guard lock(mutex_);
    if (in_flight_.empty()) return true;
    static std::vector<std::vector<std::byte>> abandoned;
    for (auto& s : in_flight_) {
      MPI_Request_free(&s.request);
      abandoned.push_back(std::move(s.bytes));
    }
    in_flight_.clear();
    return false;
  }

 private:
  struct InFlight {
    MPI_Request request;
    std::vector<std::byte> bytes;
  };

  /// Recycles the buffers of completed sends; true when none is left in flight.
  bool reap() {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < in_flight_.size();) {
      int done = 0;
      MPI_Test(&in_flight_[i].request, &done, MPI_STATUS_IGNORE);
      if (!done) {
        ++i;
        continue;
      }
      pool_.push_back(std::move(in_flight_[i].bytes));
      in_flight_[i] = std::move(in_flight_.back());
      in_flight_.pop_back();
    }
    return in_flight_.empty();
  }
  std::vector<std::byte> take_buffer() {
    std::lock_guard lock(mutex_);
    if (pool_.empty()) return {};
    std::vector<std::byte> b = std::move(pool_.back());
    pool_.pop_back();
    return b;
  }

  std::mutex mutex_;  // guards in_flight_ and pool_
  std::vector<InFlight> in_flight_;
  std::vector<std::vector<std::byte>> pool_;
};

}  // namespace gradsync::transport::detail
