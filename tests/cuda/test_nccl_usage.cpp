// Collectives 'nccl' and 'nccl-hierarchical' refuse what they cannot do before touching a GPU (so
// this runs in CI).
#include <catch2/catch.hpp>

#include <gradsync/codec/any.hpp>
#include <gradsync/collective/any.hpp>
#include <gradsync/transport/in_process.hpp>

using namespace gradsync;

TEST_CASE("Collectives 'nccl' and 'nccl-hierarchical' need transport::Nccl - 'nccl' needs fp32", "[collective][nccl]") {
  transport::InProcessGroup group(1);
  std::vector<float> data(100, 1.0f);
  collective::Job job{.data = data};
  collective::Workspace ws;
  const auto nccl = collective::AnyCollective::parse("nccl");
  CHECK(nccl.name() == "nccl");
  CHECK_THROWS_WITH(nccl.run(group.rank(0), codec::AnyCodec::parse("qsgd8"), job, ws),
                    Catch::Contains("needs a lossless codec (fp32), not 'qsgd8'"));
  for (const char* name : {"nccl", "nccl-hierarchical:4"}) {
    CAPTURE(name);
    const auto c = collective::AnyCollective::parse(name);
    CHECK(c.describe() == name);
    CHECK_THROWS_WITH(c.run(group.rank(0), codec::Identity{}, job, ws),
                      Catch::Contains("needs transport::Nccl") && Catch::Contains("in-process rank 0"));
  }
}
