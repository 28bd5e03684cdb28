// The automatic augmentation policies, colour jitter, random erasing and repeated augmentation against their
// definitions: op frequencies and magnitudes over many draws, erase statistics, the batch erase against the
// per-sample one, determinism (a pure function of the sample seed; the same batches with 0 and 3 workers) and the
// config's one-line errors. Pixel parity with torchvision is e2e/AugmentParity.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "support/fixtures.hpp"
#include "trainer/config/load.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/loader/loaders.hpp"
#include "trainer/data/pixels/auto_augment.hpp"
#include "trainer/data/pixels/color_jitter.hpp"
#include "trainer/data/pixels/random_erasing.hpp"
#include "trainer/data/pixels/sample_augment.hpp"
#include "trainer/data/sources/synthetic.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

cv::Mat random_image(int rows, int cols, int channels, uint64_t seed) {
  cv::Mat image(rows, cols, CV_8UC(channels));
  cv::RNG rng(seed);
  rng.fill(image, cv::RNG::UNIFORM, 0, 256);
  return image;
}

std::map<AugmentOp, double> op_rates(const AutoAugmentConfig& c, int draws,
                                     std::map<AugmentOp, std::vector<double>>* magnitudes = nullptr) {
  AutoAugmentPolicy policy(c);
  std::map<AugmentOp, double> rates;
  for (int i = 0; i < draws; ++i) {
    SplitMix64 rng(hash_combine(42, static_cast<uint64_t>(i)));
    for (const ChosenOp& op : policy.choose(224, 224, rng)) {
      rates[op.op] += 1.0 / draws;
      if (magnitudes) (*magnitudes)[op.op].push_back(op.magnitude);
    }
  }
  return rates;
}

TEST(AutoAugment, TrivialAugmentWidePicksOpsBinsAndSignsUniformly) {
  AutoAugmentConfig c;
  c.name = AutoAugmentKind::trivialaugment_wide;
  std::map<AugmentOp, std::vector<double>> magnitudes;
  const int draws = 28000;
  const auto rates = op_rates(c, draws, &magnitudes);
  ASSERT_EQ(rates.size(), 14u);  // Identity .. Equalize, no Invert
  for (const auto& [op, rate] : rates) EXPECT_NEAR(rate, 1.0 / 14, 0.006) << op_name(op);
  // Rotate: 31 bins of 0..135 degrees, each sign half the time; every bin shows up.
  const auto& rotate = magnitudes[AugmentOp::rotate];
  double negative = 0, mean_abs = 0;
  std::set<double> bins;
  for (double m : rotate) {
    negative += m < 0;
    mean_abs += std::fabs(m) / static_cast<double>(rotate.size());
    bins.insert(std::fabs(m));
  }
  EXPECT_NEAR(negative / static_cast<double>(rotate.size()), 0.5, 0.04);
  EXPECT_NEAR(mean_abs, 67.5, 3.0);  // uniform over the bins
  EXPECT_EQ(bins.size(), 31u);
  for (double m : magnitudes[AugmentOp::posterize]) EXPECT_TRUE(m >= 2 && m <= 8) << m;
}

TEST(AutoAugment, ImageNetPolicyAppliesEachOpAsOftenAsItsTableSays) {
  AutoAugmentConfig c;
  c.name = AutoAugmentKind::imagenet;
  const auto rates = op_rates(c, 40000);
  // Per image: the sum over the 25 sub-policies of (1/25) x the step's probability (torchvision's table).
  const std::map<AugmentOp, double> expected = {{AugmentOp::posterize, 0.112}, {AugmentOp::rotate, 0.144},
                                                {AugmentOp::solarize, 0.144},  {AugmentOp::autocontrast, 0.048},
                                                {AugmentOp::equalize, 0.448},  {AugmentOp::color, 0.152},
                                                {AugmentOp::invert, 0.072},    {AugmentOp::contrast, 0.08},
                                                {AugmentOp::sharpness, 0.016}, {AugmentOp::shear_x, 0.024}};
  EXPECT_EQ(rates.size(), expected.size());
  for (const auto& [op, rate] : expected) EXPECT_NEAR(rates.count(op) ? rates.at(op) : 0.0, rate, 0.008) << op_name(op);
}

TEST(AutoAugment, RandAugmentUsesTheFixedMagnitudeOrTimmsNoise) {
  AutoAugmentConfig c;
  c.name = AutoAugmentKind::randaugment;
  c.num_ops = 2;
  c.magnitude = 9;
  std::map<AugmentOp, std::vector<double>> fixed;
  const auto rates = op_rates(c, 14000, &fixed);
  ASSERT_EQ(rates.size(), 14u);
  for (const auto& [op, rate] : rates) EXPECT_NEAR(rate, 2.0 / 14, 0.012) << op_name(op);
  const double rotate9 = linspace_f32(0, 30, 31)[9];
  for (double m : fixed[AugmentOp::rotate]) EXPECT_EQ(std::fabs(m), rotate9);
  c.magnitude_std = 2.0;
  std::map<AugmentOp, std::vector<double>> noisy;
  op_rates(c, 14000, &noisy);
  double sum = 0, sq = 0;
  const auto& r = noisy[AugmentOp::rotate];
  for (double m : r) {
    sum += std::fabs(m);
    sq += m * m;
  }
  const double mean = sum / static_cast<double>(r.size());
  EXPECT_NEAR(mean, rotate9, 0.15);  // the noise is symmetric around bin 9 (no clipping this far from 0 and 30)
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(r.size()) - mean * mean), 2.0, 0.15);  // 1 bin = 1 degree here
}

TEST(AutoAugment, DrawsArePureFunctionsOfTheSeed) {
  const auto image = random_image(40, 48, 3, 5);
  for (const char* name : {"imagenet", "randaugment", "trivialaugment_wide", "augmix"}) {
    AutoAugmentConfig c;
    for (const auto& [n, kind] : auto_augment_kinds())
      if (n == name) c.name = kind;
    AutoAugmentPolicy policy(c);
    int changed = 0;
    for (uint64_t seed = 0; seed < 8; ++seed) {
      cv::Mat a = image.clone(), b = image.clone();
      SplitMix64 ra(seed), rb(seed);
      policy.apply(a, ra);
      policy.apply(b, rb);
      EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0) << name;
      changed += cv::norm(a, image, cv::NORM_INF) > 0;
    }
    EXPECT_GE(changed, 3) << name << " left almost every image unchanged";
  }
}

TEST(AutoAugment, GammaDrawsHaveTheirMeanAndVariance) {
  for (double alpha : {0.5, 1.0, 3.0}) {
    SplitMix64 rng(7);
    double sum = 0, sq = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      const double g = gamma_draw(rng, alpha);
      sum += g;
      sq += g * g;
    }
    const double mean = sum / n;
    EXPECT_NEAR(mean, alpha, 0.03 * std::max(1.0, alpha)) << alpha;
    EXPECT_NEAR(sq / n - mean * mean, alpha, 0.08 * std::max(1.0, alpha)) << alpha;
  }
}

TEST(ColorJitter, BrightnessFactorsAreUniformAroundOne) {
  // A flat grey 200 image: brightness f gives trunc(200 f), clamped at 255, with f uniform in [0.6, 1.4].
  ColorJitterConfig c;
  c.brightness = 0.4;
  const int n = 8000;
  int clamped = 0, lowest = 255;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    cv::Mat image(4, 4, CV_8UC3, cv::Scalar::all(200));
    SplitMix64 rng(hash_combine(11, static_cast<uint64_t>(i)));
    apply_color_jitter(image, c, rng);
    const int v = image.at<cv::Vec3b>(0, 0)[0];
    EXPECT_EQ(cv::norm(image, cv::Mat(4, 4, CV_8UC3, cv::Scalar::all(v)), cv::NORM_INF), 0);  // every pixel alike
    lowest = std::min(lowest, v);
    if (v == 255) ++clamped;
    else sum += v / 200.0;
  }
  EXPECT_GE(lowest, 119);  // 200 x 0.6, truncated
  EXPECT_LE(lowest, 121);
  EXPECT_NEAR(static_cast<double>(clamped) / n, (1.4 - 1.275) / 0.8, 0.015);  // f > 255 / 200
  EXPECT_NEAR(sum / (n - clamped), (0.6 + 1.275) / 2, 0.01);                  // uniform below the clamp
}

TEST(RandomErasing, RectanglesFollowTheScaleAndRatioDistributions) {
  RandomErasingConfig c;
  c.prob = 0.5;
  SplitMix64 rng(3);
  int erased = 0;
  double area = 0, log_ratio = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const EraseBox b = plan_erase(c, 224, 224, rng);
    if (b.height == 0) continue;
    ++erased;
    ASSERT_LT(b.height, 224);
    ASSERT_LT(b.width, 224);
    ASSERT_LE(b.top + b.height, 224);
    ASSERT_LE(b.left + b.width, 224);
    const double fraction = static_cast<double>(b.height * b.width) / (224.0 * 224.0);
    ASSERT_GT(fraction, 0.015);
    ASSERT_LT(fraction, 0.345);
    area += fraction;
    log_ratio += std::log(static_cast<double>(b.height) / static_cast<double>(b.width));
  }
  EXPECT_NEAR(static_cast<double>(erased) / n, 0.5, 0.015);
  // Uniform area in [0.02, 0.33] (mean 0.175) and log-uniform ratio in [0.3, 3.3] (mean log 0.0), slightly
  // pulled in by the rectangles that do not fit and are drawn again.
  EXPECT_NEAR(area / erased, 0.175, 0.012);
  EXPECT_NEAR(log_ratio / erased, 0.0, 0.04);
}

TEST(RandomErasing, TheBatchEraseEqualsThePerSampleDefinition) {
  const auto x0 = torch::randn({3, 2, 16, 20});
  auto boxes =
      torch::tensor({2, 3, 5, 7, 12345, 0, 0, 0, 0, 0, 10, 15, 6, 4, 99}, torch::kInt64).view({3, kEraseColumns});
  for (const auto& [value, masked] : std::vector<std::pair<ErasingValue, bool>>{{ErasingValue::zero, false},
                                                                                {ErasingValue::random, false},
                                                                                {ErasingValue::zero, true},
                                                                                {ErasingValue::random, true}}) {
    auto x = x0.clone();
    if (masked) erase_batch_masked(x, boxes, value);  // the device path, run here on the CPU
    else erase_batch(x, boxes, value);
    EXPECT_TRUE(torch::equal(x[1], x0[1]));  // height 0: untouched
    for (int64_t b : {0, 2}) {
      const auto r = boxes[b];
      const int64_t top = r[0].item<int64_t>(), left = r[1].item<int64_t>(), h = r[2].item<int64_t>(),
                    w = r[3].item<int64_t>();
      const auto region = x[b].slice(1, top, top + h).slice(2, left, left + w);
      const auto expected =
          value == ErasingValue::zero ? torch::zeros({2, h, w}) : erase_noise(r[4].item<int64_t>(), 2, h, w);
      EXPECT_TRUE(torch::equal(region, expected)) << b;
      auto outside = x[b].clone(), outside0 = x0[b].clone();
      outside.slice(1, top, top + h).slice(2, left, left + w).zero_();
      outside0.slice(1, top, top + h).slice(2, left, left + w).zero_();
      EXPECT_TRUE(torch::equal(outside, outside0)) << b;
    }
  }
  // channels_last input: the same result, both ways.
  auto a = x0.clone(), b = x0.contiguous(torch::MemoryFormat::ChannelsLast), c = b.clone();
  erase_batch(a, boxes, ErasingValue::random);
  erase_batch(b, boxes, ErasingValue::random);
  erase_batch_masked(c, boxes, ErasingValue::random);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_TRUE(torch::equal(a, c));
}

TEST(RandomErasing, NoiseIsStandardNormal) {
  const auto noise = erase_noise(4242, 3, 100, 100);
  EXPECT_NEAR(noise.mean().item<double>(), 0.0, 0.03);
  EXPECT_NEAR(noise.std().item<double>(), 1.0, 0.03);
  EXPECT_FALSE(torch::equal(noise, erase_noise(4243, 3, 100, 100)));
}

TEST(RepeatedAugmentation, EachImageComesRepeatsTimesAndTheEpochKeepsItsLength) {
  const auto order = EpochSampler::epoch_order(10, 1, 0, true, 3);
  ASSERT_EQ(order.size(), 10u);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(order[i] / 10, i % 3) << i;                  // copy number
    EXPECT_EQ(order[i] % 10, order[i - i % 3] % 10) << i;  // the same image as its group's first
  }
  // Two ranks: the copies of an image go to different ranks; together the ranks read the global batch.
  SamplerOptions o;
  o.size = 12;
  o.batch_size = 6;
  o.seed = 1;
  o.repeats = 2;
  o.world = 2;
  o.rank = 0;
  EpochSampler r0(o);
  o.rank = 1;
  EpochSampler r1(o);
  const auto global = EpochSampler::epoch_order(12, 1, 0, true, 2);
  const auto a = *r0.next(6), b = *r1.next(6);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(a[k] % 12, b[k] % 12);
    EXPECT_NE(a[k], b[k]);
    EXPECT_EQ(a[k], global[2 * k]);
    EXPECT_EQ(b[k], global[2 * k + 1]);
  }
}

DataConfig augmented_data() {
  DataConfig d;
  d.batch_size = 8;
  d.augment.color_jitter.brightness = 0.4;
  d.augment.color_jitter.saturation = 0.4;
  d.augment.color_jitter.hue = 0.1;
  d.augment.auto_augment.name = AutoAugmentKind::trivialaugment_wide;
  d.augment.random_erasing.prob = 0.5;
  d.repeated_augmentation.repeats = 2;
  return d;
}

TEST(RepeatedAugmentation, CopiesOfAnImageAreAugmentedDifferently) {
  auto source = std::make_shared<SyntheticSource>(16, ImageShape{24, 24, 3}, 4, 1);
  const DataConfig d = augmented_data();
  BatchDataset dataset(source, false, {5, 0}, nullptr, BadSlot::replace,
                       std::make_shared<const SampleAugment>(d.augment));
  int differing = 0;
  for (size_t i = 0; i < 8; ++i) {
    const ImageBatch b = dataset.get_batch({i, i + 16});
    EXPECT_EQ(b.labels[0].item<int64_t>(), b.labels[1].item<int64_t>());
    differing += !torch::equal(b.images[0], b.images[1]) || !torch::equal(b.erase[0], b.erase[1]);
  }
  EXPECT_GE(differing, 7);
}

TEST(SampleAugment, BatchesAreTheSameWithZeroAndThreeWorkers) {
  auto source = std::make_shared<SyntheticSource>(40, ImageShape{24, 24, 3}, 4, 1);
  DataConfig d = augmented_data();
  auto batches = [&](int64_t workers) {
    d.workers = workers;
    std::vector<ImageBatch> out;
    TrainLoaderOptions o;
    o.seed = 9;
    o.epoch = 2;
    auto loader = make_train_loader(source, d, o);
    for_each_batch(*loader, [&](ImageBatch& b) {
      out.push_back(b);
      return true;
    });
    return out;
  };
  const auto a = batches(0), b = batches(3);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), a.size());
  int64_t erased = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i].images, b[i].images)) << i;
    EXPECT_TRUE(torch::equal(a[i].labels, b[i].labels)) << i;
    EXPECT_TRUE(torch::equal(a[i].erase, b[i].erase)) << i;
    erased += a[i].erase.select(1, 2).gt(0).sum().item<int64_t>();
  }
  EXPECT_GT(erased, 5);
  EXPECT_LT(erased, 35);
}

Config parse(const nlohmann::json& augment) {
  nlohmann::json j = {{"data", {{"root", "/data"}, {"augment", augment}}}};
  return resolve_config(j);
}

std::string config_error(const nlohmann::json& augment) {
  try {
    parse(augment);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(AugmentConfig, APolicyNameOrAnObjectWithItsParameters) {
  const Config a = parse({{"auto_augment", "randaugment"}});
  EXPECT_EQ(a.data.augment.auto_augment.name, AutoAugmentKind::randaugment);
  EXPECT_EQ(a.data.augment.auto_augment.num_ops, 2);
  const Config b = parse({{"auto_augment", {{"name", "randaugment"}, {"num_ops", 3}, {"magnitude", 15}}},
                          {"random_erasing", {{"prob", 0.25}, {"value", 0}}},
                          {"eval_crop", 224},
                          {"image_size", 176}});
  EXPECT_EQ(b.data.augment.auto_augment.num_ops, 3);
  EXPECT_EQ(b.data.augment.auto_augment.magnitude, 15);
  EXPECT_EQ(b.data.augment.random_erasing.value, ErasingValue::zero);
  EXPECT_EQ(b.data.augment.eval_resize, 256);  // from eval_crop, not image_size
  // The resolved config reads back to the same values.
  const Config c = resolve_config(config_to_json(b));
  EXPECT_EQ(config_to_json(c), config_to_json(b));
  EXPECT_EQ(config_to_json(b)["data"]["augment"]["random_erasing"]["value"], 0);
}

TEST(AugmentConfig, BadValuesAreOneLineErrors) {
  EXPECT_NE(config_error({{"auto_augment", "randaugmnet"}})
                .find("data.augment.auto_augment.name: unknown value \"randaugmnet\"; did you mean \"randaugment\"?"),
            std::string::npos)
      << config_error({{"auto_augment", "randaugmnet"}});
  EXPECT_NE(config_error({{"auto_augment", {{"name", "randaugment"}, {"magnitude", 31}}}})
                .find("data.augment.auto_augment.magnitude: expected a bin 0 .. num_magnitude_bins - 1 (30), got 31"),
            std::string::npos);
  EXPECT_NE(config_error({{"random_erasing", {{"prob", 1.5}}}}).find("data.augment.random_erasing.prob"),
            std::string::npos);
  EXPECT_NE(config_error({{"random_erasing", {{"value", "noise"}}}}).find("valid: 0, random"), std::string::npos)
      << config_error({{"random_erasing", {{"value", "noise"}}}});
  EXPECT_NE(config_error({{"random_erasing", {{"scale", {0.5, 0.2}}}}}).find("data.augment.random_erasing.scale"),
            std::string::npos);
  EXPECT_NE(config_error({{"auto_augment", {{"name", "augmix"}, {"severity", 11}}}})
                .find("data.augment.auto_augment.severity"),
            std::string::npos);
  EXPECT_NE(config_error({{"auto_augment", {{"name", "augmix"}, {"chain_depth", 0}}}}).find("chain_depth"),
            std::string::npos);
  EXPECT_NE(config_error({{"auto_augment", {{"fill", {1, 2}}}}}).find("data.augment.auto_augment.fill: expected 1"),
            std::string::npos);
  EXPECT_NE(config_error({{"color_jitter", {{"hue", 0.7}}}}).find("data.augment.color_jitter.hue"), std::string::npos);
  EXPECT_NE(config_error({{"eval_crop", 224}, {"eval_resize", 200}}).find("data.augment.eval_resize"),
            std::string::npos);
}

}  // namespace
}  // namespace trainer
