#include "trainer/models/classifier.hpp"

#include <torch/torch.h>

#include "trainer/util/torch_compat.hpp"

namespace trainer {

torch::Tensor float_logits(Classifier& model, const torch::Tensor& images, c10::DeviceType device,
                           std::optional<at::ScalarType> autocast) {
  if (!autocast) return model.forward(images).to(torch::kFloat);
  compat::AutocastGuard guard(device, *autocast);
  return model.forward(images).to(torch::kFloat);
}  // autocast off, its cache of low-precision weight copies cleared

}  // namespace trainer
