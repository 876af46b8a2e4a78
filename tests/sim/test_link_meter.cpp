// The tuner's online re-check: the link's rate from unit timings (units in flight at once share
// the link, so their spans are merged, not summed), and the rule that says the network changed.
#include <catch2/catch.hpp>

#include <gradsync/sim/link_meter.hpp>

namespace sim = gradsync::sim;
using Clock = gradsync::UnitEvent::clock;

namespace {

gradsync::UnitEvent unit(double started_ms, double finished_ms, std::size_t bytes) {
  const Clock::time_point t0{};
  gradsync::UnitEvent e;
  e.started = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(started_ms));
  e.finished = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(finished_ms));
  e.bytes_sent = bytes;
  return e;
}

}  // namespace

TEST_CASE("the link meter counts the time any unit was on the wire once", "[sim][retune]") {
  sim::LinkMeter meter;
  // Out of order, as executors finish them: [10, 30] and [20, 40] overlap, [50, 60] and [55, 58]
  // nest, [70, 70] takes no time.
  meter.add(unit(50, 60, 1000));
  meter.add(unit(20, 40, 3000));
  meter.add(unit(10, 30, 2000));
  meter.add(unit(55, 58, 500));
  meter.add(unit(70, 70, 0));
  const sim::LinkWindow w = meter.take();
  CHECK(w.units == 5);
  CHECK(w.bytes == 6500);
  CHECK(w.busy_seconds == Approx(0.040));  // 30 ms + 10 ms, not the 63 ms the spans sum to
  CHECK(w.rate() == Approx(6500 / 0.040));

  const sim::LinkWindow next = meter.take();  // a new window
  CHECK(next.units == 0);
  CHECK(next.rate() == 0);
}

TEST_CASE("the link watch keeps the setting while the rate holds and says by how much it moved when it does",
          "[sim][retune]") {
  sim::LinkWatch watch(0.5);
  CHECK_FALSE(watch.observe(0));      // no wire time: ignored
  CHECK_FALSE(watch.observe(1.0e8));  // the baseline
  CHECK_FALSE(watch.observe(1.4e8));  // within a factor 1.5 either way
  CHECK_FALSE(watch.observe(0.7e8));
  CHECK_FALSE(watch.observe(0.2e8));  // one slow window alone: noise
  CHECK_FALSE(watch.observe(1.0e8));
  CHECK_FALSE(watch.observe(0.2e8));  // slow, then fast: not the same way twice
  CHECK_FALSE(watch.observe(2.0e8));
  CHECK_FALSE(watch.observe(0.3e8));
  const auto slower = watch.observe(0.25e8);  // the second slow window in a row: a quarter of the baseline
  REQUIRE(slower);
  CHECK(*slower == Approx(0.25));
  CHECK_FALSE(watch.observe(0.3e8));  // the new baseline, under the new setting
  CHECK_FALSE(watch.observe(0.9e8));  // three times it
  const auto faster = watch.observe(0.9e8);
  REQUIRE(faster);
  CHECK(*faster == Approx(3));
  CHECK_FALSE(watch.observe(1.0e8));  // baseline
  CHECK_FALSE(watch.observe(3.0e8));
  watch.reset();                      // another watch re-tuned: start over
  CHECK_FALSE(watch.observe(3.0e8));  // the new baseline, not the second fast window
  CHECK_FALSE(watch.observe(3.1e8));
  CHECK_THROWS_AS(sim::LinkWatch(0), gradsync::UsageError);

  // An iteration-time watch counts only rises: falls are mostly a job's warm-up ending.
  sim::LinkWatch pace(0.2, sim::LinkWatch::Watch::rises);
  CHECK_FALSE(pace.observe(0.2));
  CHECK_FALSE(pace.observe(0.1));
  CHECK_FALSE(pace.observe(0.1));  // twice half the baseline: not a change
  CHECK_FALSE(pace.observe(0.25));
  const auto rose = pace.observe(0.26);  // twice 1.25x and 1.3x
  REQUIRE(rose);
  CHECK(*rose == Approx(1.3));
}
