// The trainer over the library's Synchronizer (in-process ranks): P3 and wait-free-backprop
// policies agree with the exact reference all-reduce.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "library_run.hpp"
#include "resume.hpp"
#include "support/memory_channels.hpp"
#include "small_config.hpp"

using namespace gradsync::trainer;
using test::LibraryRun;

namespace {
void require_close(const TrainResult& a, const TrainResult& b) {
  REQUIRE(a.weights.size() == b.weights.size());
  for (std::size_t t = 0; t < a.weights.size(); ++t)
    for (std::size_t i = 0; i < a.weights[t].size(); ++i) REQUIRE(a.weights[t][i] == Approx(b.weights[t][i]).margin(1e-4));
}

// 8 iterations of the small ResNet, checkpointed to `checkpoint` at the end.
TrainConfig resumable(const std::string& checkpoint) {
  TrainConfig c = test::small_resnet_config();
  c.epochs = 0;
  c.iterations = 8;
  c.evaluate = false;
  c.checkpoint = checkpoint;
  return c;
}

TrainResult train_on_two(const TrainConfig& c, const gradsync::PolicyNames& policies) {
  LibraryRun run(2, policies);
  return train(c, run.factory());
}
}  // namespace

TEST_CASE("P3 and WFBP policies train like the exact all-reduce (lossless codec)", "[trainer][sync]") {
  const TrainConfig c = test::small_resnet_config();
  const TrainResult exact = train(c);  // LocalAllReduceGroup
  LibraryRun p3(2, {.slicing = "fixed:40", .priority = "forward", .codec = "fp32", .collective = "ring"});
  LibraryRun wfbp(2, {.slicing = "whole", .priority = "fifo", .codec = "fp32", .collective = "ring"});
  const TrainResult a = train(c, p3.factory()), b = train(c, wfbp.factory());
  require_close(a, exact);
  require_close(b, exact);
  CHECK(a.test_accuracy == Approx(exact.test_accuracy).margin(0.01));
  CHECK(b.test_accuracy == Approx(exact.test_accuracy).margin(0.01));
  CHECK(exact.test_accuracy > 0.5);  // 4 classes: it learned something
}

// Error feedback keeps per-rank residuals in the synchronizer, and QSGD keys its rounding on the
// synchronizer's iteration; a resume that dropped either would send different gradients from the
// first resumed iteration on.
TEST_CASE("Checkpoint + resume with lossy codecs is bit-identical (residuals, iteration restored)", "[trainer][sync]") {
  for (const std::string codec : {"onebit:bypass=0", "topk:0.05:bypass=0", "ef+qsgd4:bypass=0", "qsgd4:bypass=0"}) {
    CAPTURE(codec);
    const gradsync::PolicyNames policies{.slicing = "fixed:300", .priority = "forward", .codec = codec, .collective = "ring"};
    const std::string whole = "gradsync_test_ef_whole.ckpt", part = "gradsync_test_ef_part.ckpt";
    TrainConfig c = resumable(whole);
    const TrainResult uninterrupted = train_on_two(c, policies);

    c.checkpoint = part;
    c.stop_after = 4;
    train_on_two(c, policies);
    // The residuals are really there (nonzero), one file per rank.
    const bool residuals = codec.find("qsgd4") == std::string::npos || codec.starts_with("ef+");
    for (std::size_t r = 0; r < 2 && residuals; ++r) {
      std::ifstream in(sync_state_path(part, r), std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), {}};
      REQUIRE(bytes.size() > 1000);
      CHECK(bytes.find_first_not_of('\0', bytes.size() / 2) != std::string::npos);
    }
    c.stop_after = 0;
    c.resume = part;
    LibraryRun second_half(2, policies);
    const TrainResult resumed = train(c, second_half.factory());
    CHECK(resumed.iterations == 4);
    CHECK(resumed.weights == uninterrupted.weights);

    // Mismatches are named: another codec, another model, a missing rank file.
    gradsync::PolicyNames fp32 = policies;
    fp32.codec = "fp32";
    LibraryRun other_codec(2, fp32);
    CHECK_THROWS_WITH(train(c, other_codec.factory()), Catch::Contains("synchronization") && Catch::Contains("fp32"));
    TrainConfig other_model = c;
    other_model.model.width = 0.25;
    LibraryRun wider(2, policies);
    CHECK_THROWS_WITH(train(other_model, wider.factory()), Catch::Contains("width"));
    if (residuals) {
      // The resumed run checkpointed to `part` again: its generation before is there too.
      for (const auto& f : {part, previous_checkpoint_path(part)}) std::filesystem::remove(sync_state_path(f, 1));
      LibraryRun missing(2, policies);
      CHECK_THROWS_WITH(train(c, missing.factory()), Catch::Contains(".rank1") && Catch::Contains("codec state"));
    }
    for (const auto& f : {whole, part, previous_checkpoint_path(whole), previous_checkpoint_path(part)})
      for (const auto& path : {f, sync_state_path(f, 0), sync_state_path(f, 1)}) std::filesystem::remove(path);
  }
}

// Every rank writes its codec state file, then rank 0 its checkpoint: a run killed in between
// leaves files of two generations. Each save keeps the file it replaces as <file>.prev, so the
// resume takes the newest generation that every rank finished and still ends bit-identical.
TEST_CASE("A run killed while checkpointing resumes from the newest generation every rank finished", "[trainer][sync]") {
  namespace fs = std::filesystem;
  const gradsync::PolicyNames policies{.slicing = "fixed:300", .priority = "forward", .codec = "ef+qsgd4:bypass=0",
                                       .collective = "ring"};
  const std::string whole = "gradsync_test_gen_whole.ckpt", part = "gradsync_test_gen_part.ckpt";
  const std::string prev = previous_checkpoint_path(part);
  TrainConfig c = resumable(whole);
  const TrainResult uninterrupted = train_on_two(c, policies);

  // Generations at iterations 2 (".prev") and 4.
  c.checkpoint = part;
  c.checkpoint_every = 2;
  c.stop_after = 4;
  train_on_two(c, policies);
  REQUIRE(fs::exists(prev));
  for (std::size_t r = 0; r < 2; ++r) REQUIRE(fs::exists(sync_state_path(prev, r)));
  const auto resume = [&] {
    TrainConfig again = c;
    again.checkpoint = "";
    again.stop_after = 0;
    again.resume = part;
    return train_on_two(again, policies);
  };
  const auto save = [](const std::string& from, const std::string& to) {
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  };

  SECTION("rank 1 killed before it wrote its state at 4: resumed from 2") {
    save(sync_state_path(prev, 1), sync_state_path(part, 1));
    const TrainResult resumed = resume();
    CHECK(resumed.iterations == 6);
    CHECK(resumed.weights == uninterrupted.weights);
  }
  SECTION("rank 0 killed before its checkpoint at 4, after every state at 4: resumed from 2") {
    save(prev, part);
    const TrainResult resumed = resume();
    CHECK(resumed.iterations == 6);
    CHECK(resumed.weights == uninterrupted.weights);
  }
  SECTION("every file at 4: resumed from 4") {
    const TrainResult resumed = resume();
    CHECK(resumed.iterations == 4);
    CHECK(resumed.weights == uninterrupted.weights);
  }
  SECTION("no generation that every rank finished: the error names the missing file") {
    fs::remove(sync_state_path(prev, 1));
    fs::remove(sync_state_path(part, 1));
    CHECK_THROWS_WITH(resume(), Catch::Contains(sync_state_path(part, 1)) && Catch::Contains("no codec state of rank 1"));
  }
  for (const auto& f : {whole, part, prev})
    for (const auto& file : {f, sync_state_path(f, 0), sync_state_path(f, 1)}) fs::remove(file);
}

// DGT's checkpoint carries what it learned (every block's contribution, the ratios, loss_0) with
// the residuals of dropped blocks. Every best-effort datagram is lost here, so what arrives
// follows the classification alone and the runs are deterministic.
TEST_CASE("Checkpoint + resume with DGT is bit-identical (contributions, loss_0, residuals restored)",
          "[trainer][sync][dgt]") {
  const gradsync::PolicyNames policies{.slicing = "fixed:300", .priority = "forward", .codec = "fp32", .collective = "dgt:block=32"};
  testing::MemoryChannels lost(2, [](int, int, int) { return true; });
  const auto run = [&](const TrainConfig& c) {
    LibraryRun dgt(2, policies);
    dgt.best_effort = [&](gradsync::transport::Transport& t) { return lost.channel(t.rank()); };
    return train(c, dgt.factory());
  };
  const std::string whole = "gradsync_test_dgt_whole.ckpt", part = "gradsync_test_dgt_part.ckpt";
  TrainConfig c = resumable(whole);
  c.iterations = 12;
  const TrainResult uninterrupted = run(c);
  std::uint64_t best_effort = 0;
  for (const auto& blocks : uninterrupted.iteration_blocks) best_effort += blocks[1];
  REQUIRE(best_effort > 0);  // the loss fell: some blocks were unimportant, and lost

  const TrainResult resumed = test::stop_and_resume(c, part, 6, run);
  CHECK(resumed.iterations == 6);
  CHECK(resumed.weights == uninterrupted.weights);
  for (const auto& f : {whole, part, previous_checkpoint_path(whole), previous_checkpoint_path(part)})
    for (const auto& path : {f, sync_state_path(f, 0), sync_state_path(f, 1)}) std::filesystem::remove(path);
}

// DGT through the trainer: the step reports its loss, so fewer blocks are important as the loss
// falls (p = loss_t / loss_0), the rest go as datagrams, and the run still learns; evaluations
// every N iterations carry the training time so far (time to accuracy).
TEST_CASE("DGT through the trainer: p follows the loss, blocks counted per iteration, it learns", "[trainer][sync][dgt]") {
  TrainConfig c = test::small_resnet_config();
  c.evaluate_every = 8;  // 16 iterations per epoch: one mid-epoch evaluation each
  LibraryRun dgt(2, {.slicing = "fixed:300", .priority = "forward", .codec = "fp32", .collective = "dgt:block=32"});
  const TrainResult r = train(c, dgt.factory());
  CHECK(r.test_accuracy > 0.5);

  const std::size_t n = r.iteration_blocks.size();
  REQUIRE(n == r.iteration_seconds.size());
  REQUIRE(n == r.iteration_loss.size());
  double early = 0, late = 0, early_loss = 0, late_loss = 0;  // first and last quarter
  std::uint64_t best_effort = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i < n / 4) early += double(r.iteration_blocks[i][0]), early_loss += r.iteration_loss[i];
    if (i >= n - n / 4) late += double(r.iteration_blocks[i][0]), late_loss += r.iteration_loss[i];
    best_effort += r.iteration_blocks[i][1];
  }
  // p = loss_t / loss_0, so the important blocks fall with the loss, by less: tensors of one or
  // two blocks keep theirs (p rounds up). Measured on this model: the last quarter's loss 0.62 of
  // the first's, its important blocks 0.79, a fall 0.55 times the loss's (the same under load:
  // the loss path does not depend on timing here). With p fixed the blocks would not fall; with
  // p following the loss half as much, they would fall about half as far.
  const double loss_fall = 1 - late_loss / early_loss, blocks_fall = 1 - late / early;
  INFO("last quarter against the first: loss " << 1 - loss_fall << ", important blocks " << 1 - blocks_fall);
  CHECK(r.epochs.back().train_loss < 0.7 * r.epochs.front().train_loss);
  REQUIRE(loss_fall > 0.25);
  CHECK(blocks_fall > 0.45 * loss_fall);
  CHECK(best_effort > 0);

  REQUIRE(r.evaluations.size() == 2 * c.epochs);  // mid-epoch and epoch end
  for (std::size_t i = 0; i < r.evaluations.size(); ++i) {
    CHECK(r.evaluations[i].iteration == 8 * (i + 1));
    if (i > 0) CHECK(r.evaluations[i].train_seconds > r.evaluations[i - 1].train_seconds);
  }
  CHECK(r.evaluations.back().test_accuracy == r.test_accuracy);
}
