#include "trainer/data/pixels/auto_augment.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

namespace trainer {

namespace {

using O = AugmentOp;

// AutoAugment's ImageNet policy (torchvision's AutoAugmentPolicy.IMAGENET): (op, probability, magnitude bin;
// -1 for ops without a magnitude).
struct PolicyStep {
  AugmentOp op;
  double probability;
  int bin;
};
const std::array<std::array<PolicyStep, 2>, 25>& imagenet_policy() {
  static const std::array<std::array<PolicyStep, 2>, 25> policy{{
      {{{O::posterize, 0.4, 8}, {O::rotate, 0.6, 9}}},    {{{O::solarize, 0.6, 5}, {O::autocontrast, 0.6, -1}}},
      {{{O::equalize, 0.8, -1}, {O::equalize, 0.6, -1}}}, {{{O::posterize, 0.6, 7}, {O::posterize, 0.6, 6}}},
      {{{O::equalize, 0.4, -1}, {O::solarize, 0.2, 4}}},  {{{O::equalize, 0.4, -1}, {O::rotate, 0.8, 8}}},
      {{{O::solarize, 0.6, 3}, {O::equalize, 0.6, -1}}},  {{{O::posterize, 0.8, 5}, {O::equalize, 1.0, -1}}},
      {{{O::rotate, 0.2, 3}, {O::solarize, 0.6, 8}}},     {{{O::equalize, 0.6, -1}, {O::posterize, 0.4, 6}}},
      {{{O::rotate, 0.8, 8}, {O::color, 0.4, 0}}},        {{{O::rotate, 0.4, 9}, {O::equalize, 0.6, -1}}},
      {{{O::equalize, 0.0, -1}, {O::equalize, 0.8, -1}}}, {{{O::invert, 0.6, -1}, {O::equalize, 1.0, -1}}},
      {{{O::color, 0.6, 4}, {O::contrast, 1.0, 8}}},      {{{O::rotate, 0.8, 8}, {O::color, 1.0, 2}}},
      {{{O::color, 0.8, 8}, {O::solarize, 0.8, 7}}},      {{{O::sharpness, 0.4, 7}, {O::invert, 0.6, -1}}},
      {{{O::shear_x, 0.6, 5}, {O::equalize, 1.0, -1}}},   {{{O::color, 0.4, 0}, {O::equalize, 0.6, -1}}},
      {{{O::equalize, 0.4, -1}, {O::solarize, 0.2, 4}}},  {{{O::solarize, 0.6, 5}, {O::autocontrast, 0.6, -1}}},
      {{{O::invert, 0.6, -1}, {O::equalize, 1.0, -1}}},   {{{O::color, 0.6, 4}, {O::contrast, 1.0, 8}}},
      {{{O::equalize, 0.8, -1}, {O::equalize, 0.6, -1}}},
  }};
  return policy;
}

const OpSpace& space_of(const std::vector<OpSpace>& space, AugmentOp op) {
  for (const auto& s : space)
    if (s.op == op) return s;
  throw std::logic_error("auto_augment: the policy uses " + op_name(op) + ", which its op table lacks");
}

double signed_magnitude(const OpSpace& s, double magnitude, SplitMix64& rng) {
  return s.is_signed && rng.below(2) == 1 ? -magnitude : magnitude;
}

// timm's magnitude noise on RandAugment's bin, clipped to the table; the magnitude between two bins is
// interpolated as linspace would place it (posterize rounds to a whole bin).
double noisy_magnitude(const OpSpace& s, double bin, int64_t num_bins) {
  bin = std::clamp(bin, 0.0, static_cast<double>(num_bins - 1));
  const auto lo = static_cast<size_t>(std::floor(bin));
  const size_t hi = std::min(lo + 1, s.magnitudes.size() - 1);
  if (s.op == AugmentOp::posterize) return s.magnitudes[static_cast<size_t>(std::nearbyint(bin))];
  const double t = bin - static_cast<double>(lo);
  return s.magnitudes[lo] + (s.magnitudes[hi] - s.magnitudes[lo]) * t;
}

// torchvision's AutoAugment.get_params: a sub-policy, two probabilities, two signs.
std::vector<ChosenOp> choose_imagenet(const AutoAugmentConfig&, const std::vector<OpSpace>& space, SplitMix64& rng) {
  std::vector<ChosenOp> ops;
  const auto& steps = imagenet_policy()[rng.below(25)];
  const double p[2] = {uniform01(rng), uniform01(rng)};
  const bool negative[2] = {rng.below(2) == 0, rng.below(2) == 0};
  for (size_t i = 0; i < 2; ++i) {
    if (!(p[i] <= steps[i].probability)) continue;
    const OpSpace& s = space_of(space, steps[i].op);
    double m = steps[i].bin >= 0 ? s.magnitudes[static_cast<size_t>(steps[i].bin)] : 0.0;
    if (s.is_signed && negative[i]) m = -m;
    ops.push_back({steps[i].op, m});
  }
  return ops;
}

std::vector<ChosenOp> choose_randaugment(const AutoAugmentConfig& c, const std::vector<OpSpace>& space,
                                         SplitMix64& rng) {
  std::vector<ChosenOp> ops;
  for (int64_t k = 0; k < c.num_ops; ++k) {
    const OpSpace& s = space[rng.below(space.size())];
    double m = 0.0;
    if (!s.magnitudes.empty()) {
      m = c.magnitude_std > 0
              ? noisy_magnitude(s, static_cast<double>(c.magnitude) + c.magnitude_std * standard_normal(rng),
                                c.num_magnitude_bins)
              : s.magnitudes[static_cast<size_t>(c.magnitude)];
    }
    ops.push_back({s.op, signed_magnitude(s, m, rng)});
  }
  return ops;
}

std::vector<ChosenOp> choose_trivialaugment_wide(const AutoAugmentConfig&, const std::vector<OpSpace>& space,
                                                 SplitMix64& rng) {
  const OpSpace& s = space[rng.below(space.size())];
  const double m = s.magnitudes.empty() ? 0.0 : s.magnitudes[rng.below(s.magnitudes.size())];
  return {{s.op, signed_magnitude(s, m, rng)}};
}

void apply_augmix(const AutoAugmentConfig& c, const OpSettings& settings, const std::vector<OpSpace>& space,
                  cv::Mat& image, SplitMix64& rng) {
  // Beta(alpha, alpha) as a two-way Dirichlet; then the chains' Dirichlet weights times the augmented share.
  const double g0 = gamma_draw(rng, c.alpha), g1 = gamma_draw(rng, c.alpha);
  const auto m0 = static_cast<float>(g0 / (g0 + g1)), m1 = static_cast<float>(g1 / (g0 + g1));
  std::vector<double> w(static_cast<size_t>(c.mixture_width));
  double total = 0;
  for (double& x : w) total += x = gamma_draw(rng, c.alpha);
  const size_t n = image.total() * static_cast<size_t>(image.channels());
  // float32 arithmetic in torchvision's order: mix = m0 * img; mix += w_i * aug_i; then truncation to uint8.
  std::vector<float> mix(n);
  const uint8_t* original = image.ptr<uint8_t>();
  for (size_t i = 0; i < n; ++i) mix[i] = m0 * static_cast<float>(original[i]);
  cv::Mat aug;
  for (size_t chain = 0; chain < w.size(); ++chain) {
    image.copyTo(aug);
    const int64_t depth = c.chain_depth > 0 ? c.chain_depth : 1 + static_cast<int64_t>(rng.below(3));
    for (int64_t d = 0; d < depth; ++d) {
      const OpSpace& s = space[rng.below(space.size())];
      const double m = s.magnitudes.empty() ? 0.0 : s.magnitudes[rng.below(static_cast<uint64_t>(c.severity))];
      apply_op(aug, s.op, signed_magnitude(s, m, rng), settings);
    }
    const float weight = static_cast<float>(w[chain] / total) * m1;
    const uint8_t* a = aug.ptr<uint8_t>();
    for (size_t i = 0; i < n; ++i) mix[i] += weight * static_cast<float>(a[i]);
  }
  uint8_t* out = image.ptr<uint8_t>();
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(std::clamp(mix[i], 0.0f, 255.0f));
}

}  // namespace

double standard_normal(SplitMix64& rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

double gamma_draw(SplitMix64& rng, double alpha) {
  if (alpha < 1.0) {
    // Gamma(a) = Gamma(a + 1) * U^(1/a).
    const double u = 1.0 - uniform01(rng);
    return gamma_draw(rng, alpha + 1.0) * std::pow(u, 1.0 / alpha);
  }
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = standard_normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - uniform01(rng);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

AutoAugmentPolicy::AutoAugmentPolicy(const AutoAugmentConfig& config)
    : config_(config), row_(&policy_row(config.name)) {
  settings_.interpolation = config.interpolation;
  for (size_t c = 0; c < 3; ++c)
    settings_.fill[c] = static_cast<uint8_t>(config.fill[std::min(c, config.fill.size() - 1)]);
}

const std::vector<PolicyRow>& policy_rows() {
  static const std::vector<PolicyRow> rows{
      {/*kind=*/AutoAugmentKind::none, /*space=*/nullptr, /*fixed_bins=*/0, /*choose=*/nullptr, /*apply=*/nullptr},
      {/*kind=*/AutoAugmentKind::imagenet, /*space=*/autoaugment_space, /*fixed_bins=*/10, /*choose=*/choose_imagenet,
       /*apply=*/nullptr},
      {/*kind=*/AutoAugmentKind::randaugment, /*space=*/randaugment_space, /*fixed_bins=*/0,
       /*choose=*/choose_randaugment, /*apply=*/nullptr},
      {/*kind=*/AutoAugmentKind::trivialaugment_wide, /*space=*/trivialaugment_wide_space, /*fixed_bins=*/0,
       /*choose=*/choose_trivialaugment_wide, /*apply=*/nullptr},
      {/*kind=*/AutoAugmentKind::augmix, /*space=*/augmix_space, /*fixed_bins=*/10, /*choose=*/nullptr,
       /*apply=*/apply_augmix},
  };
  return rows;
}

const PolicyRow& policy_row(AutoAugmentKind kind) { return row_of(policy_rows(), kind); }

std::vector<OpSpace> augmentation_space(AutoAugmentKind kind, int64_t num_bins, int64_t height, int64_t width) {
  const PolicyRow& row = policy_row(kind);
  if (!row.space) return {};
  return row.space(row.fixed_bins > 0 ? row.fixed_bins : num_bins, height, width);
}

std::vector<OpSpace> AutoAugmentPolicy::space(int64_t height, int64_t width) const {
  return augmentation_space(config_.name, config_.num_magnitude_bins, height, width);
}

std::vector<ChosenOp> AutoAugmentPolicy::choose(int64_t height, int64_t width, SplitMix64& rng) const {
  if (!row_->choose) return {};
  return row_->choose(config_, space(height, width), rng);
}

void AutoAugmentPolicy::apply(cv::Mat& image, SplitMix64& rng) const {
  if (!active()) return;
  if (row_->apply) return row_->apply(config_, settings_, space(image.rows, image.cols), image, rng);
  for (const ChosenOp& c : row_->choose(config_, space(image.rows, image.cols), rng))
    apply_op(image, c.op, c.magnitude, settings_);
}

}  // namespace trainer
