#pragma once
// LayerProfiler: rank 0's compute time per layer, for gradsync-sim's profile (gradsync-train
// --profile FILE; schema in tools/sim/README.md). The trainer's Rank reports each compute span it
// closes (the same spans --trace draws) to the layer it belongs to. The profile's times are, per
// layer and pass, the median over the iterations after the warm-up, scaled so that they add up to
// the median of the per-iteration totals: on a shared machine some iterations are much slower, and
// the sum of per-layer medians falls short of the median iteration's compute (measured: 13% for
// ResNet-20 on 2 busy cores), which is what gradsync-sim's iteration time is compared with.
//
// Layers are the modules that own parameters, in forward order, plus an "input" layer without
// tensors first: its forward is the batch loading and whatever runs before the first layer, its
// backward what runs after the first layer's gradients are ready (the rest of the backward pass,
// finish_iteration). A layer's forward includes its optimizer step (applied just before it, as in
// the real step) and the parameterless layers up to the next one (ReLU, pooling; the loss after the
// last); its backward ends when its gradients are handed over. Waiting in wait_for is not compute
// and is left out. The profile also keeps the per-iteration totals after the warm-up: gradsync-sim
// draws each rank's pace from their spread (rank skew).
//
//   LayerProfiler prof;           // cfg.profiler = &prof; train(cfg, ...);
//   prof.write("vgg11.json", "vgg11");
#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <gradsync/sim/profile.hpp>

#include "gradsync/trainer/module.hpp"

namespace gradsync::trainer {

class LayerProfiler {
 public:
  enum Pass { forward = 0, backward = 1 };

  /// `warmup`: leading iterations left out of the medians (all but the last are dropped when a
  /// run has no more than that). `keep`: iterations recorded at most (later ones are not timed).
  explicit LayerProfiler(std::size_t warmup = 2, std::size_t keep = SIZE_MAX) : warmup_(warmup), keep_(keep) {}

  /// Starts the next iteration's samples.
  void begin_iteration() { ++iterations_; }
  /// Adds `seconds` to `pass` of the layer owning `layer` (its parameters; empty: the input layer).
  void add(Pass pass, std::span<Param* const> layer, double seconds);

  std::size_t iterations() const { return iterations_; }
  /// The profile: per layer the medians, per tensor its elements. Throws std::logic_error before
  /// any iteration was recorded.
  sim::Profile profile(const std::string& model) const { return profile(model, iterations_); }
  /// The profile of the first `iterations` recorded (those finished while the next one runs).
  sim::Profile profile(const std::string& model, std::size_t iterations) const;
  /// profile(model) as JSON at `path` (tools/sim/profile_json.hpp's writer).
  void write(const std::string& path, const std::string& model) const;

 private:
  struct Layer {
    std::string name;
    std::vector<LayerSpec> tensors;
    std::vector<double> seconds[2];  // per pass, per iteration
  };
  std::vector<double> totals_;            // per iteration, all layers
  // The median over iterations [skipped(end), end).
  double median(const std::vector<double>& per_iteration, std::size_t end) const;
  /// Leading iterations a profile of `end` leaves out (the warm-up; all but the last of a short run).
  std::size_t skipped(std::size_t end) const { return std::min(warmup_, end - 1); }

  std::map<std::size_t, Layer> layers_;  // key: first parameter's index + 1 (0: input), so forward order
  std::size_t iterations_ = 0, warmup_, keep_;
};

}  // namespace gradsync::trainer
