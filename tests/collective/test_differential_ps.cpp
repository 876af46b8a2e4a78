// collective/differential_ps.hpp (DGT): the contribution estimate and classification against
// hand-computed values, p following the loss, and the knobs parsed and checked.
#include <catch2/catch.hpp>

#include <gradsync/collective/any.hpp>
#include <gradsync/collective/differential_ps.hpp>

using namespace gradsync;

TEST_CASE("dgt: sliding average of mean |g| per block, top p% important", "[dgt]") {
  const collective::DifferentialPs d{.alpha = 0.3f, .p0 = 1.0f, .block = 4};
  std::vector<float> c0(4, 0.0f), c1(2, 0.0f);  // the contributions of a unit of 16 and one of 6
  // What a rank reports: mean |gradient + residual| per block; the residual can cancel or add.
  const std::vector<float> g{1, -1, 1, -1, 4, 4, -4, 4, 2, 2, 2, -2, 3, -3, 3, 3};
  std::vector<float> r(16, 0.0f), m(4);
  r[0] = -1;  // block 0: |0| + 1 + 1 + 1 -> 0.75
  r[8] = 2;   // block 2: 4 + 2 + 2 + 2 -> 2.5
  d.magnitudes(g, r, m);
  REQUIRE_THAT(m, Catch::Matchers::Approx(std::vector<float>{0.75f, 4.0f, 2.5f, 3.0f}));
  d.magnitudes(g, {}, m);  // no residual
  REQUIRE_THAT(m, Catch::Matchers::Approx(std::vector<float>{1.0f, 4.0f, 2.0f, 3.0f}));
  // block means 1, 4, 2, 3: C = 0.7 * mean
  d.observe(c0, m);
  REQUIRE_THAT(c0, Catch::Matchers::Approx(std::vector<float>{0.7f, 2.8f, 1.4f, 2.1f}));
  std::vector<std::uint8_t> important;
  d.classify(c0, 0.5f, important);  // p = 0.5: the two largest
  CHECK(important == std::vector<std::uint8_t>{0, 1, 0, 1});
  d.classify(c0, 1.0f, important);
  CHECK(important == std::vector<std::uint8_t>{1, 1, 1, 1});
  // means 5, 0, 0, 0: C = 0.3 C + 0.7 mean = 3.71, 0.84, 0.42, 0.63
  d.observe(c0, std::vector<float>{5, 0, 0, 0});
  REQUIRE_THAT(c0, Catch::Matchers::Approx(std::vector<float>{3.71f, 0.84f, 0.42f, 0.63f}));
  d.classify(c0, 0.25f, important);
  CHECK(important == std::vector<std::uint8_t>{1, 0, 0, 0});
  // a short last block is averaged over its own elements; ties go to the lower index
  std::vector<float> short_m(2);
  d.magnitudes(std::vector<float>{2, 2, 2, 2, 2, -2}, {}, short_m);
  CHECK(short_m == std::vector<float>{2, 2});
  d.observe(c1, short_m);
  d.classify(c1, 0.5f, important);
  CHECK(important == std::vector<std::uint8_t>{1, 0});
  CHECK_THROWS_WITH(d.observe(c1, m), Catch::Contains("4 block magnitudes for a unit of 2 blocks"));
  CHECK(d.blocks(16) == 4);
  CHECK(d.blocks(6) == 2);
}

TEST_CASE("dgt: p = p0 * loss_t / loss_0, clamped to [0, 1] - bad knobs refused", "[dgt]") {
  using collective::DifferentialPs;
  CHECK(DifferentialPs{.p0 = 1.0f}.share(1.0f) == 1.0);
  CHECK(DifferentialPs{.p0 = 1.0f}.share(0.5f) == 0.5);
  CHECK(DifferentialPs{.p0 = 0.5f}.share(0.4f) == Approx(0.2));
  CHECK(DifferentialPs{.p0 = 1.0f}.share(3.0f) == 1.0);
  CHECK(DifferentialPs{.p0 = 2.0f}.share(0.6f) == 1.0);  // p0 > 1: all important until loss_0 / 2
  CHECK(DifferentialPs{.p0 = 2.0f}.share(0.2f) == Approx(0.4));
  const auto parse = [](std::string_view text) { return collective::AnyCollective::parse(text); };
  CHECK_THROWS_WITH(parse("dgt:alpha=1.5"), Catch::Contains("alpha"));
  CHECK_THROWS_WITH(parse("dgt:p0=0"), Catch::Contains("p0"));
  CHECK_THROWS_WITH(parse("dgt:p0=inf"), Catch::Contains("p0"));
  CHECK_THROWS_WITH(parse("dgt:block=0"), Catch::Contains("block"));
  CHECK(std::get<DifferentialPs>(parse("dgt:p0=2").policy).p0 == 2.0f);
  CHECK_THROWS_WITH(parse("dgt:beta=1"), Catch::Contains("valid: ring, ps,") && Catch::Contains("dgt[:alpha=A][:p0=P][:block=N]"));
  const auto p = std::get<DifferentialPs>(parse("dgt:alpha=0.5:p0=0.8:block=512").policy);
  CHECK(p.alpha == 0.5f);
  CHECK(p.p0 == 0.8f);
  CHECK(p.block == 512);
  CHECK(p.describe() == "dgt:alpha=0.500000:p0=0.800000:block=512");  // what the handshake compares
  CHECK(std::holds_alternative<DifferentialPs>(parse("dgt").policy));
}
