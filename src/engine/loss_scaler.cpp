#include "trainer/engine/loss_scaler.hpp"

#include <torch/torch.h>

namespace trainer {

LossScaler::LossScaler(const AmpConfig& amp, bool enabled)
    : enabled_(enabled),
      scale_(enabled ? amp.init_scale : 1.0),
      growth_factor_(amp.growth_factor),
      backoff_factor_(amp.backoff_factor),
      growth_interval_(amp.growth_interval) {}

torch::Tensor LossScaler::scale(const torch::Tensor& loss) const { return enabled_ ? loss * scale_ : loss; }

bool LossScaler::unscale(const std::vector<torch::Tensor>& parameters) const {
  if (!enabled_) return false;
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return false;
  // Like GradScaler, the reciprocal is taken in double and applied as a float32 scalar.
  const auto device = grads.front().device();
  auto options = torch::TensorOptions().dtype(torch::kFloat).device(device);
  auto found_inf = torch::zeros({1}, options);
  if (device.is_cuda()) {
    const auto inv_scale = torch::full({1}, 1.0 / scale_, options);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  } else {
    const auto inv_scale = static_cast<float>(1.0 / scale_);
    for (auto& g : grads) {
      g.mul_(inv_scale);
      found_inf.logical_or_(torch::isfinite(g).logical_not().any());
    }
  }
  return found_inf.item<float>() != 0.0f;
}

void LossScaler::update(bool overflow) {
  if (!enabled_) return;
  if (overflow) {
    scale_ *= backoff_factor_;
    growth_tracker_ = 0;
    ++skipped_;
  } else if (++growth_tracker_ == growth_interval_) {
    scale_ *= growth_factor_;
    growth_tracker_ = 0;
  }
}

nlohmann::json LossScaler::state() const {
  return {{"enabled", enabled_}, {"scale", scale_}, {"growth_tracker", growth_tracker_}, {"skipped", skipped_}};
}

void LossScaler::load_state(const nlohmann::json& state) {
  // A checkpoint from a run without a scaler (or another dtype) leaves the configured start values.
  if (!state.is_object() || !state.value("enabled", false) || !enabled_) return;
  scale_ = state.at("scale").get<double>();
  growth_tracker_ = state.at("growth_tracker").get<int64_t>();
  skipped_ = state.at("skipped").get<int64_t>();
}

}  // namespace trainer
