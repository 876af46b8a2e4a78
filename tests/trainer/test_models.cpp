// Model construction: published parameter counts at ImageNet shape, any input size, bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "gradsync/trainer/model.hpp"

using namespace gradsync::trainer;

namespace {
std::size_t count(const std::string& name) {
  return make_model({.name = name, .width = 1.0, .input = {3, 224, 224}, .classes = 1000})->parameter_count();
}
}  // namespace

TEST_CASE("Parameter counts match the published ImageNet models", "[trainer][models]") {
  CHECK(count("resnet50") == 25'557'032);
  CHECK(count("resnet18") == 11'689'512);
  CHECK(count("vgg16") == 138'357'544);
  CHECK(count("vgg19") == 143'667'240);
}

TEST_CASE("Every model runs forward and backward at Fashion-MNIST shape", "[trainer][models]") {
  for (const auto& name : model_names()) {
    ModelConfig cfg{.name = name, .width = 0.125, .input = {1, 28, 28}, .classes = 10};
    if (name == "lstm-lm") cfg.input = {6};
    auto model = make_model(cfg);
    model->initialize(2);
    Tensor x = name == "lstm-lm" ? Tensor({2, 6}, 3.0f) : Tensor({2, 1, 28, 28}, 0.5f);
    Context ctx{.training = true};
    Tensor y = model->forward(x, ctx);
    INFO(name);
    CHECK(y.shape().back() == 10);
    CHECK(y.size() == 2 * 10 * model->labels_per_sample());
    Tensor dx = model->backward(y, ctx);
    CHECK(dx.shape() == x.shape());
    for (auto* p : model->params()) CHECK(p->grad.size() == p->value.size());
  }
}

TEST_CASE("Seeds draw unrelated initial weights at the init rules' scales", "[trainer][models]") {
  // lstm: uniform weights and bias; resnet20: normal convolutions, ones and zeros for batch norm
  for (const char* name : {"lstm", "resnet20"}) {
    INFO(name);
    auto a = make_model({.name = name, .width = 1.0, .input = {1, 28, 28}, .classes = 10});
    auto b = make_model({.name = name, .width = 1.0, .input = {1, 28, 28}, .classes = 10});
    a->initialize(1);
    b->initialize(2);
    for (std::size_t t = 0; t < a->params().size(); ++t) {
      const Param& p = *a->params()[t];
      const Param& q = *b->params()[t];
      if (p.init != Param::Init::uniform && p.init != Param::Init::normal) continue;
      INFO(p.name);
      const std::vector<float> x = p.value.to_host(), y = q.value.to_host();
      const std::size_t n = x.size();
      // Seed 2 was seed 1's draws one counter on: a uniform tensor shifted by one element.
      std::size_t shifted = 0, same = 0;
      double sq = 0, cross = 0;
      for (std::size_t i = 0; i < n; ++i) {
        shifted += i + 1 < n && y[i] == x[i + 1];
        same += y[i] == x[i];
        sq += double(x[i]) * x[i];
        cross += double(x[i]) * y[i];
      }
      CHECK(shifted <= n / 1000);
      CHECK(same <= n / 1000);
      if (n < 1000) continue;  // too few values for the statistics
      const double sd = std::sqrt(sq / double(n));
      const double expected = p.init == Param::Init::normal ? p.init_scale : p.init_scale / std::sqrt(3.0);
      CHECK(std::abs(sd / expected - 1.0) < 0.05);
      CHECK(std::abs(cross / sq) < 5.0 / std::sqrt(double(n)));  // uncorrelated
    }
  }
}

TEST_CASE("Width multiplier scales the channels", "[trainer][models]") {
  const auto small = make_model({.name = "resnet20", .width = 0.5})->parameter_count();
  const auto full = make_model({.name = "resnet20", .width = 1.0})->parameter_count();
  CHECK(full > 3 * small);
  CHECK(make_model({.name = "resnet20"})->params().front()->name == "conv1.weight");
}

TEST_CASE("Bad model requests get clear errors", "[trainer][models]") {
  CHECK_THROWS_WITH(make_model({.name = "resnet21"}), Catch::Contains("unknown model 'resnet21'") &&
                                                          Catch::Contains("resnet20"));
  CHECK_THROWS_WITH(make_model({.name = "vgg11", .input = {28, 28}}), Catch::Contains("[C, H, W]"));
  CHECK_THROWS_WITH(make_model({.name = "resnet18", .input = {3, 0, 8}}), Catch::Contains("positive sizes"));
  CHECK_THROWS_WITH(make_model({.name = "lstm-lm", .input = {3, 8, 8}}), Catch::Contains("token ids"));
  CHECK_THROWS(make_model({.name = "resnet20", .width = 0.0}));
}
