// AnyCodec::parse: every documented spelling, and ConfigError naming the string and the choices.
#include <catch2/catch.hpp>

#include <gradsync/codec/any.hpp>

using namespace gradsync::codec;
using gradsync::ConfigError;

TEST_CASE("AnyCodec parses every codec and its options", "[codec][any]") {
  CHECK(AnyCodec::parse("fp32").name() == "fp32");
  CHECK(AnyCodec::parse("fp32").traits().lossless);
  CHECK(AnyCodec::parse("bf16").name() == "bf16");
  for (auto [spec, name] : {std::pair{"qsgd2", "qsgd2"}, {"qsgd4", "qsgd4"}, {"qsgd8", "qsgd8"}, {"qsgd16", "qsgd16"},
                            {"onebit", "onebit"}, {"topk", "topk"}, {"ef+qsgd8", "ef+qsgd8"}, {"ef+bf16", "ef+bf16"}})
    CHECK(AnyCodec::parse(spec).name() == name);

  const auto q = std::get<Qsgd<4>>(AnyCodec::parse("qsgd4:bucket=1024:norm=l2:bypass=7").variant());
  CHECK(q.bucket == 1024);
  CHECK(q.norm == QsgdNorm::l2);
  CHECK(q.bypass_below == 7);
  CHECK(std::get<Qsgd<16>>(AnyCodec::parse("qsgd16").variant()).bucket == 8192);
  CHECK(std::get<TopK>(AnyCodec::parse("topk:0.001").variant()).ratio == 0.001f);
  CHECK(std::get<TopK>(AnyCodec::parse("topk:ratio=0.25").variant()).ratio == 0.25f);
  CHECK(std::get<OneBit>(AnyCodec::parse("onebit:bucket=128").variant()).bucket == 128);
  const auto ef = std::get<ErrorFeedback<Qsgd<2>>>(AnyCodec::parse("ef+qsgd2:bucket=256").variant());
  CHECK(ef.inner.bucket == 256);
  CHECK(AnyCodec::parse("onebit").traits().needs_residual);
}

TEST_CASE("AnyCodec answers with the chosen codec's declared traits", "[codec][any]") {
  struct Case {
    const char* spec;
    bool lossless, residual;
  };
  for (const Case c : {Case{"fp32", true, false}, {"fp16", false, false}, {"bf16", false, false}, {"qsgd4", false, false},
                       {"onebit", false, true}, {"topk", false, true}, {"ef+fp16", false, true}, {"ef+qsgd8", false, true}}) {
    INFO(c.spec);
    const Traits t = AnyCodec::parse(c.spec).traits();
    CHECK(t.lossless == c.lossless);
    CHECK(t.needs_residual == c.residual);
  }
  static_assert(static_lossless<Identity> == true && static_lossless<Qsgd<8>> == false);
  static_assert(!static_lossless<AnyCodec>.has_value(), "a runtime codec's traits are known only at run time");
  static_assert(ErrorFeedback<Half>{}.traits().needs_residual && !Half{}.traits().needs_residual);
}

TEST_CASE("AnyCodec rejects malformed strings with the string and the valid choices", "[codec][any]") {
  for (const char* bad : {"", "fp64", "qsgd3", "QSGD8", "qsgd8:", "qsgd8:bucket=", "qsgd8:bucket=12x", "qsgd8:bucket=100",
                          "qsgd8:norm=l1", "qsgd8:ratio=0.1", "fp32:bypass=3", "topk:0", "topk:2", "topk:abc",
                          "onebit:bucket=48", "ef+fp32", "ef+onebit", "ef+", "fp16:bucket=128", "topk:0.1:"}) {
    INFO(bad);
    try {
      (void)AnyCodec::parse(bad);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      CHECK(what.find("\"" + std::string(bad) + "\"") != std::string::npos);
      CHECK(what.find("qsgd2|qsgd4|qsgd8|qsgd16") != std::string::npos);
    }
  }
}

TEST_CASE("AnyCodec works as a codec", "[codec][any]") {
  const auto c = AnyCodec::parse("qsgd8:bypass=0");
  std::vector<float> v(1000, 0.5f), out(1000);
  std::vector<std::byte> wire(c.encoded_bytes(v.size()));
  c.decode(std::span(wire).first(c.encode(v, wire, {})), out);
  CHECK(out == v);  // a constant bucket is its own max: exact
}
