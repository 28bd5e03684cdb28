// Mixup and CutMix of a training batch (timm's batch mode): with probability mix.prob the batch is blended
// with its own reverse order, by mixup (lam * x + (1 - lam) * x.flip(0)) or CutMix (a box of the reversed
// batch pasted in, lam corrected to the box's true area), lam ~ Beta(alpha, alpha). The draw is a pure function
// of (seed, step, micro-batch), so resumed runs mix exactly as uninterrupted ones.
//   const MixedBatch m = mix_batch(x, y, config.train.mix, hash(seed, step, micro));
//   loss = mixed_cross_entropy(logits, m, label_smoothing);
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "trainer/config/config.hpp"

namespace trainer {

struct MixedBatch {
  torch::Tensor images;    // float NCHW, mixed
  torch::Tensor labels;    // int64: the first target
  torch::Tensor labels_b;  // int64: the second target (labels.flip(0)); undefined when lam == 1
  double lam = 1.0;        // weight of `labels`
  bool cutmix = false;
};

MixedBatch mix_batch(const torch::Tensor& images, const torch::Tensor& labels, const MixConfig& mix, uint64_t seed);

// Soft-target cross-entropy against lam * onehot(labels) + (1 - lam) * onehot(labels_b), each smoothed by
// `label_smoothing` as timm does. The loss is linear in the target, so it is computed as the lam-weighted sum
// of two label-smoothed cross-entropies, without materialising a [B, classes] target matrix.
// `class_weights` (undefined: none) weigh each image's loss by its class, PyTorch's weighted mean.
torch::Tensor mixed_cross_entropy(const torch::Tensor& logits, const MixedBatch& batch, double label_smoothing,
                                  const torch::Tensor& class_weights = {});

}  // namespace trainer
