#include "trainer/engine/train_step.hpp"

#include <torch/torch.h>

namespace trainer {

StepResult train_step(Classifier& model, torch::optim::Optimizer& optimizer, const torch::Tensor& images,
                      const torch::Tensor& labels, double label_smoothing) {
  const auto logits = model.forward(images);
  const auto loss = torch::nn::functional::cross_entropy(
      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
  // Dropping the gradients (rather than zeroing them) spares a pass over every parameter; backward
  // allocates them afresh. Module::zero_grad takes the flag on both LibTorch 1.13 and 2.x.
  model.zero_grad(/*set_to_none=*/true);
  loss.backward();
  optimizer.step();
  return {logits.detach(), loss.detach()};
}

}  // namespace trainer
