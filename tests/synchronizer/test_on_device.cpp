// codec::OnDevice through the whole Synchronizer, over its host twin of GPU memory
// (support/guarded_device.hpp: pages unreadable outside the codec's steps, so any host read of a
// unit crashes the test): the host codec's aggregates bit for bit where the maths is the same,
// identical on every rank; what stays refused is refused by name.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>

#include <gradsync/codec/on_device.hpp>

#include "support/device_runs.hpp"
#include "support/guarded_device.hpp"

using namespace gradsync;
using testing::Aggregates;
using testing::bit_identical;
using testing::DeviceBuffer;
using testing::GuardedDevice;
using testing::GuardedOnDevice;
using DeviceSynchronizer = testing::DeviceSynchronizer<GuardedDevice>;
const auto on_device = testing::on_device<GuardedDevice>;

const auto run = testing::run_policies<GuardedDevice, DeviceBuffer>;

TEST_CASE("the twin's device memory faults when the host reads it outside the codec's steps") {
  DeviceBuffer b(10);
  b.upload(std::vector<float>(10, 1.0f));
  REQUIRE(b.download() == std::vector<float>(10, 1.0f));
  const pid_t child = fork();
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // not Catch's or a sanitizer's handler, which would exit instead
    const volatile float x = b.span()[3];  // what a stray host read in the library would do
    (void)x;
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
}

static_assert(codec::DeviceCodec<GuardedOnDevice<codec::Qsgd<8>>>);
static_assert(codec::DeviceCodec<GuardedOnDevice<codec::AnyCodec>>);
static_assert(!codec::DeviceCodec<codec::Qsgd<8>>);
// a runtime codec's fp32 units keep its type: no second instantiation of the collectives
static_assert(std::same_as<decltype(GuardedOnDevice<codec::AnyCodec>{}.fp32()), GuardedOnDevice<codec::AnyCodec>>);
static_assert(std::same_as<decltype(GuardedOnDevice<codec::Half>{}.fp32()), GuardedOnDevice<codec::Identity>>);

TEST_CASE("OnDevice keeps its codec's wire, grain and bypass") {
  const GuardedOnDevice<codec::Qsgd<8>> d{{.bucket = 256}};
  CHECK(d.name() == "qsgd8");
  CHECK(d.traits().grain == 256);
  CHECK(d.traits().bypass_below == codec::bypass_auto);
  CHECK(codec::static_lossless<GuardedOnDevice<codec::Identity>> == std::optional<bool>(true));
  // device in, host wire out: the bytes the host codec writes
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = testing::grad_value(0, 0, 0, i);
  DeviceBuffer dx(x.size());
  dx.upload(x);
  const codec::EncodeContext ctx{.seed = 3, .iteration = 1, .unit = 2};
  std::vector<std::byte> host(d.encoded_bytes(x.size())), device(host.size());
  REQUIRE(d.inner.encode(x, host, ctx) == d.encode(dx.span(), device, ctx));
  CHECK(host == device);
  // host wire in, device out
  std::vector<float> sum(x.size(), 1.0f);
  DeviceBuffer dsum(x.size());
  dsum.upload(sum);
  d.inner.decode_add(host, sum);
  d.decode_add(host, dsum.span());
  CHECK(dsum.download() == sum);
}

TEST_CASE("OnDevice through the Synchronizer gives the host codec's aggregates, identical on every rank") {
  struct Case {
    const char* collective;
    int ranks;
    bool fp32_exact;  // host fp32 takes the raw-fp32 ring, which sums in another order beyond 2 ranks
  };
  const auto [collective, ranks, fp32_exact] =
      GENERATE(Case{"ring", 2, true}, Case{"ps", 3, true}, Case{"reduce-broadcast", 3, true},
               Case{"hierarchical:2", 4, true}, Case{"hybrid:8KiB:2", 4, false});
  // qsgd8 with its automatic bypass: the small tensors go as fp32 (OnDevice::fp32)
  const std::string codec = GENERATE("fp32", "fp16:bypass=0", "qsgd8:bypass=0", "qsgd8");
  const std::string slicing = GENERATE("fixed:1000", "whole");
  CAPTURE(collective, ranks, codec, slicing);
  const PolicyNames names{slicing, "forward", codec, collective};
  const auto host = run(names, ranks, false);
  const auto device = run(names, ranks, true);
  const bool exact = fp32_exact || codec.starts_with("fp16") || codec.ends_with("bypass=0");
  for (int r = 0; r < ranks; ++r) {
    CAPTURE(r);
    if (exact) REQUIRE(bit_identical(host[r], device[r]));
    REQUIRE(bit_identical(device[0], device[r]));
  }
  if (codec == "fp32") testing::require_reference(device[0], ranks, true);
}

TEST_CASE("OnDevice with fp32 on a ring of 3: the reference mean, identical on every rank") {
  const auto device = run({"fixed:1000", "fifo", "fp32", "ring"}, 3, true);
  testing::require_reference(device[0], 3, true);
  for (int r = 1; r < 3; ++r) REQUIRE(bit_identical(device[0], device[r]));
}

TEST_CASE("OnDevice with host gradients is its codec: error feedback and fusion included") {
  const std::string codec = GENERATE("onebit", "topk:0.1:bypass=0", "ef+qsgd4:bypass=0");
  CAPTURE(codec);
  const PolicyNames names{"fusion:16KiB", "forward", codec, "ps"};
  auto host_memory = [&](bool adapter) {
    return testing::run_ranks<Aggregates>(2, [&](int r, transport::Transport& t) {
      const auto policies = AnySynchronizer::parse(names);
      if (!adapter) {
        AnySynchronizer sync(t, testing::uneven_layout(), {}, policies);
        return testing::train_with(sync, r);
      }
      DeviceSynchronizer sync(t, testing::uneven_layout(), {}, on_device(policies));
      return testing::train_with(sync, r);
    });
  };
  const auto plain = host_memory(false), adapted = host_memory(true);
  REQUIRE(bit_identical(plain[0], adapted[0]));
  REQUIRE(bit_identical(plain[1], adapted[1]));
}

TEST_CASE("a NaN in device memory is found on the device, naming the element") {
  transport::InProcessGroup g(1);
  const ModelLayout layout{{"w", 100}};
  DeviceSynchronizer sync(g.rank(0), layout, {}, on_device(AnySynchronizer::parse({"whole", "forward", "fp16", "ring"})));
  DeviceBuffer w(100);
  std::vector<float> v(100, 1.0f);
  v[37] = std::numeric_limits<float>::infinity();
  w.upload(v);
  const auto iteration = [&] {  // the error surfaces at finish_iteration or the wait, whichever follows the check
    sync.gradient_ready(0, w.span());
    sync.finish_iteration();
    sync.wait_all();
  };
  REQUIRE_THROWS_WITH(iteration(), Catch::Contains("layer 'w' has a non-finite gradient (element 37 is inf)"));
}

namespace {
/// A collective that reads units on the host, as the vendor all-reduces do.
struct ReadsOnHost {
  static constexpr collective::Traits traits() { return {}; }  // not through_codec
  std::string_view name() const { return "reads-on-host"; }
  template <codec::Codec C>
  std::size_t run(transport::Transport&, const C&, collective::Job&, collective::Workspace&) const {
    return 0;
  }
};
}  // namespace

TEST_CASE("device memory through OnDevice: what would read it on the host is refused by name") {
  transport::InProcessGroup g(1);
  const ModelLayout layout{{"w", 100}, {"b", 10}};
  DeviceBuffer w(100);
  w.upload(std::vector<float>(100, 1.0f));
  auto refused = [&](auto&& sync) {
    try {
      sync.gradient_ready(0, w.span());
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto any = [&](const PolicyNames& names) {
    return DeviceSynchronizer(g.rank(0), layout, {}, on_device(AnySynchronizer::parse(names)));
  };
  using slicing::WholeLayer, priority::ForwardOrder;
  CHECK_THAT(refused(Synchronizer<WholeLayer, ForwardOrder, GuardedOnDevice<codec::Identity>, ReadsOnHost>(g.rank(0), layout)),
             Catch::Contains("layer 'w' is in GPU memory") &&
                 Catch::Contains("collective 'reads-on-host' reads units on the host: use 'ring', 'ps'"));
  CHECK_THAT(refused(any({"whole", "forward", "onebit", "ring"})),
             Catch::Contains("codec 'onebit' keeps its error-feedback residual on the host"));
  CHECK_THAT(refused(any({"whole", "forward", "ef+fp16", "ring"})), Catch::Contains("error-feedback residual"));
  CHECK_THAT(refused(any({"fusion:4KiB", "forward", "fp32", "ring"})), Catch::Contains("fuses it with other layers"));
  CHECK_THAT(refused(any({"whole", "forward", "fp32", "dgt"})),
             Catch::Contains("collective 'dgt:") && Catch::Contains("reads units on the host"));
  // accepted: check_finite runs on the device, the collective touches the unit through the codec only
  auto ok = any({"whole", "fifo", "qsgd8:bypass=0", "reduce-broadcast"});
  CHECK(refused(ok).empty());
  DeviceBuffer b(10);
  b.upload(std::vector<float>(10, 2.0f));
  ok.gradient_ready(1, b.span());
  ok.finish_iteration();
  ok.wait_all();
  CHECK(b.download() == std::vector<float>(10, 2.0f));
}
