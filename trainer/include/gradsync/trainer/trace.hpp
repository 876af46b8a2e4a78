#pragma once
// A Chrome trace (the JSON Perfetto and chrome://tracing open): complete events ("ph": "X") per
// rank (pid) and lane (tid: 0 compute, 1 units queued, 2 units on the wire). Thread-safe.
#include <chrono>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gradsync::trainer {

class Trace {
 public:
  using Clock = std::chrono::steady_clock;
  enum Lane { compute = 0, queued = 1, wire = 2 };

  void span(std::string name, std::size_t rank, Lane lane, Clock::time_point begin, Clock::time_point end) {
    std::lock_guard lock(mutex_);
    events_.push_back({std::move(name), rank, lane, begin, end});
  }

  void write(const std::string& path) const {
    std::lock_guard lock(mutex_);
    static constexpr const char* lanes[] = {"compute", "units queued", "units on the wire"};
    nlohmann::json events = nlohmann::json::array();
    auto us = [&](Clock::time_point t) { return std::chrono::duration<double, std::micro>(t - start_).count(); };
    for (const auto& e : events_)
      events.push_back({{"name", e.name}, {"cat", lanes[e.lane]}, {"ph", "X"}, {"pid", e.rank}, {"tid", int(e.lane)},
                        {"ts", us(e.begin)}, {"dur", us(e.end) - us(e.begin)}});
    std::ofstream out(path);
    out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
    if (!out) throw std::runtime_error(path + ": cannot write the trace");
  }

 private:
  struct Event {
    std::string name;
    std::size_t rank;
    Lane lane;
    Clock::time_point begin, end;
  };
  mutable std::mutex mutex_;
  Clock::time_point start_ = Clock::now();
  std::vector<Event> events_;
};

}  // namespace gradsync::trainer
