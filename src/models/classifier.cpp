#include "trainer/models/classifier.hpp"

#include <torch/torch.h>

#include "trainer/models/sync_batch_norm.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {

bool is_batch_norm(const torch::nn::Module& m) {
  return m.as<torch::nn::BatchNorm1d>() || m.as<torch::nn::BatchNorm2d>() || m.as<torch::nn::BatchNorm3d>() ||
         m.as<SyncBatchNorm2d>();
}

bool has_batch_norm(const torch::nn::Module& model) {
  for (const auto& m : model.modules(/*include_self=*/true))
    if (is_batch_norm(*m)) return true;
  return false;
}

torch::Tensor float_logits(Classifier& model, const torch::Tensor& images, c10::DeviceType device,
                           std::optional<at::ScalarType> autocast) {
  if (!autocast) return model.forward(images).to(torch::kFloat);
  compat::AutocastGuard guard(device, *autocast);
  return model.forward(images).to(torch::kFloat);
}  // autocast off, its cache of low-precision weight copies cleared

}  // namespace trainer
