// The order of one epoch as a pure function of (seed, epoch): the same batches whatever the worker count or the
// number of data-parallel processes, and a resumed run can start at any batch offset. The loaders (loaders.hpp)
// take their batch plans from it.
//   SamplerOptions o;  o.size = n;  o.batch_size = 64;  o.seed = 1;  o.epoch = 3;  o.start_batch = 10;
//   EpochSampler s(o);
#pragma once

#include <torch/data/samplers/base.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace trainer {

// The image indices of each class, in index order: what a balanced sampler draws from.
using ClassMembers = std::vector<std::vector<size_t>>;

struct SamplerOptions {
  size_t size = 0;
  size_t batch_size = 1;
  uint64_t seed = 0;
  int64_t epoch = 0;
  bool shuffle = true;
  bool drop_last = false;
  size_t start_batch = 0;  // batches of this epoch already consumed (resume)
  size_t rank = 0;         // data-parallel: this process takes its share of every (global) batch
  size_t world = 1;
  size_t repeats = 1;  // repeated augmentation: each drawn image comes `repeats` times (see epoch_order)
  // data.sampler balanced: the images of each class (non-null: every draw is a class, then one of its images).
  std::shared_ptr<const ClassMembers> balanced = nullptr;
};

// Rank `rank`'s share of a global batch of `batch` images over `world` processes: a contiguous [first, first +
// count) slice, the first batch % world ranks taking one image more (as numpy.array_split), so the shares of all
// ranks, in rank order, are the global batch.
struct BatchShare {
  size_t first = 0, count = 0;
};
BatchShare batch_share(size_t batch, size_t rank, size_t world);

class EpochSampler final : public torch::data::samplers::Sampler<std::vector<size_t>> {
 public:
  explicit EpochSampler(SamplerOptions options);

  // The full index order of an epoch: identity, or a Fisher-Yates shuffle driven by hash(seed, epoch). With
  // repeats r > 1 (torchvision's RASampler), each image of that order is followed by its copies i + k * size
  // (k = 1 .. r - 1), and the epoch stops after `size` entries; a batch's copies are dealt to the ranks in turn.
  // With `balanced`, the order is `size` draws instead, each a class chosen uniformly among those with images and
  // then one of its images, from the same hash(seed, epoch) stream.
  static std::vector<size_t> epoch_order(size_t size, uint64_t seed, int64_t epoch, bool shuffle, size_t repeats = 1,
                                         const ClassMembers* balanced = nullptr);

  size_t batches_per_epoch() const;

  // A loader calls reset() before it takes batches: back to start_batch.
  void reset(torch::optional<size_t> new_size = torch::nullopt) override;
  torch::optional<std::vector<size_t>> next(size_t batch_size) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  SamplerOptions options_;
  std::vector<size_t> order_;
  size_t position_ = 0;  // index into order_
};

}  // namespace trainer
