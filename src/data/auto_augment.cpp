#include "trainer/data/auto_augment.hpp"

#include <array>
#include <cmath>

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
      {{{O::posterize, 0.4, 8}, {O::rotate, 0.6, 9}}},
      {{{O::solarize, 0.6, 5}, {O::autocontrast, 0.6, -1}}},
      {{{O::equalize, 0.8, -1}, {O::equalize, 0.6, -1}}},
      {{{O::posterize, 0.6, 7}, {O::posterize, 0.6, 6}}},
      {{{O::equalize, 0.4, -1}, {O::solarize, 0.2, 4}}},
      {{{O::equalize, 0.4, -1}, {O::rotate, 0.8, 8}}},
      {{{O::solarize, 0.6, 3}, {O::equalize, 0.6, -1}}},
      {{{O::posterize, 0.8, 5}, {O::equalize, 1.0, -1}}},
      {{{O::rotate, 0.2, 3}, {O::solarize, 0.6, 8}}},
      {{{O::equalize, 0.6, -1}, {O::posterize, 0.4, 6}}},
      {{{O::rotate, 0.8, 8}, {O::color, 0.4, 0}}},
      {{{O::rotate, 0.4, 9}, {O::equalize, 0.6, -1}}},
      {{{O::equalize, 0.0, -1}, {O::equalize, 0.8, -1}}},
      {{{O::invert, 0.6, -1}, {O::equalize, 1.0, -1}}},
      {{{O::color, 0.6, 4}, {O::contrast, 1.0, 8}}},
      {{{O::rotate, 0.8, 8}, {O::color, 1.0, 2}}},
      {{{O::color, 0.8, 8}, {O::solarize, 0.8, 7}}},
      {{{O::sharpness, 0.4, 7}, {O::invert, 0.6, -1}}},
      {{{O::shear_x, 0.6, 5}, {O::equalize, 1.0, -1}}},
      {{{O::color, 0.4, 0}, {O::equalize, 0.6, -1}}},
      {{{O::equalize, 0.4, -1}, {O::solarize, 0.2, 4}}},
      {{{O::solarize, 0.6, 5}, {O::autocontrast, 0.6, -1}}},
      {{{O::invert, 0.6, -1}, {O::equalize, 1.0, -1}}},
      {{{O::color, 0.6, 4}, {O::contrast, 1.0, 8}}},
      {{{O::equalize, 0.8, -1}, {O::equalize, 0.6, -1}}},
  }};
  return policy;
}

const OpSpace& space_of(const std::vector<OpSpace>& space, AugmentOp op) {
  for (const auto& s : space)
    if (s.op == op) return s;
  return space.front();
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

AutoAugmentPolicy::AutoAugmentPolicy(const AutoAugmentConfig& config) : config_(config) {
  settings_.interpolation = config.interpolation;
  for (size_t c = 0; c < 3; ++c)
    settings_.fill[c] = static_cast<uint8_t>(config.fill[std::min(c, config.fill.size() - 1)]);
}

std::vector<ChosenOp> AutoAugmentPolicy::choose(int64_t height, int64_t width, SplitMix64& rng) const {
  std::vector<ChosenOp> ops;
  switch (config_.name) {
    case AutoAugmentKind::none:
    case AutoAugmentKind::augmix:
      break;
    case AutoAugmentKind::imagenet: {
      // torchvision's get_params: a sub-policy, two probabilities, two signs.
      const auto space = augmentation_space(SpaceKind::autoaugment, 10, height, width);
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
      break;
    }
    case AutoAugmentKind::randaugment: {
      const auto space = augmentation_space(SpaceKind::randaugment, config_.num_magnitude_bins, height, width);
      for (int64_t k = 0; k < config_.num_ops; ++k) {
        const OpSpace& s = space[rng.below(space.size())];
        double m = 0.0;
        if (!s.magnitudes.empty()) {
          m = config_.magnitude_std > 0
                  ? noisy_magnitude(s, static_cast<double>(config_.magnitude) + config_.magnitude_std * standard_normal(rng),
                                    config_.num_magnitude_bins)
                  : s.magnitudes[static_cast<size_t>(config_.magnitude)];
        }
        ops.push_back({s.op, signed_magnitude(s, m, rng)});
      }
      break;
    }
    case AutoAugmentKind::trivialaugment_wide: {
      const auto space = augmentation_space(SpaceKind::trivialaugment_wide, config_.num_magnitude_bins, height, width);
      const OpSpace& s = space[rng.below(space.size())];
      const double m = s.magnitudes.empty() ? 0.0 : s.magnitudes[rng.below(s.magnitudes.size())];
      ops.push_back({s.op, signed_magnitude(s, m, rng)});
      break;
    }
  }
  return ops;
}

void AutoAugmentPolicy::apply(cv::Mat& image, SplitMix64& rng) const {
  if (config_.name == AutoAugmentKind::augmix) return apply_augmix(image, rng);
  for (const ChosenOp& c : choose(image.rows, image.cols, rng)) apply_op(image, c.op, c.magnitude, settings_);
}

void AutoAugmentPolicy::apply_augmix(cv::Mat& image, SplitMix64& rng) const {
  const auto space = augmentation_space(SpaceKind::augmix, 10, image.rows, image.cols);
  // Beta(alpha, alpha) as a two-way Dirichlet; then the chains' Dirichlet weights times the augmented share.
  const double g0 = gamma_draw(rng, config_.alpha), g1 = gamma_draw(rng, config_.alpha);
  const auto m0 = static_cast<float>(g0 / (g0 + g1)), m1 = static_cast<float>(g1 / (g0 + g1));
  std::vector<double> w(static_cast<size_t>(config_.mixture_width));
  double total = 0;
  for (double& x : w) total += x = gamma_draw(rng, config_.alpha);
  const size_t n = image.total() * static_cast<size_t>(image.channels());
  // float32 arithmetic in torchvision's order: mix = m0 * img; mix += w_i * aug_i; then truncation to uint8.
  std::vector<float> mix(n);
  const uint8_t* original = image.ptr<uint8_t>();
  for (size_t i = 0; i < n; ++i) mix[i] = m0 * static_cast<float>(original[i]);
  cv::Mat aug;
  for (size_t chain = 0; chain < w.size(); ++chain) {
    image.copyTo(aug);
    const int64_t depth = config_.chain_depth > 0 ? config_.chain_depth : 1 + static_cast<int64_t>(rng.below(3));
    for (int64_t d = 0; d < depth; ++d) {
      const OpSpace& s = space[rng.below(space.size())];
      const double m = s.magnitudes.empty()
                           ? 0.0
                           : s.magnitudes[rng.below(static_cast<uint64_t>(config_.severity))];
      apply_op(aug, s.op, signed_magnitude(s, m, rng), settings_);
    }
    const float weight = static_cast<float>(w[chain] / total) * m1;
    const uint8_t* a = aug.ptr<uint8_t>();
    for (size_t i = 0; i < n; ++i) mix[i] += weight * static_cast<float>(a[i]);
  }
  uint8_t* out = image.ptr<uint8_t>();
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(std::clamp(mix[i], 0.0f, 255.0f));
}

}  // namespace trainer
