#include "trainer/data/loader/epoch_sampler.hpp"

#include <torch/serialize/archive.h>

#include <numeric>

#include "trainer/util/error.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

BatchShare batch_share(size_t batch, size_t rank, size_t world) {
  const size_t base = batch / world, extra = batch % world;
  return {rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

EpochSampler::EpochSampler(SamplerOptions options) : options_(options) {
  if (options_.batch_size == 0) throw Error("EpochSampler: batch_size must be > 0", 1);
  if (options_.world == 0 || options_.rank >= options_.world) throw Error("EpochSampler: rank must be < world", 1);
  order_ = epoch_order(options_.size, options_.seed, options_.epoch, options_.shuffle, options_.repeats,
                       options_.balanced.get());
  reset(torch::nullopt);
}

std::vector<size_t> EpochSampler::epoch_order(size_t size, uint64_t seed, int64_t epoch, bool shuffle, size_t repeats,
                                              const ClassMembers* balanced) {
  std::vector<size_t> order(size);
  std::iota(order.begin(), order.end(), size_t{0});
  if (balanced != nullptr) {
    std::vector<const std::vector<size_t>*> classes;
    for (const auto& members : *balanced)
      if (!members.empty()) classes.push_back(&members);
    SplitMix64 rng(hash_combine(seed, static_cast<uint64_t>(epoch)));
    for (size_t k = 0; k < size && !classes.empty(); ++k) {
      const auto& members = *classes[rng.below(classes.size())];
      order[k] = members[rng.below(members.size())];
    }
  } else if (shuffle) {
    // Our own Fisher-Yates: std::shuffle's sequence differs between standard libraries.
    SplitMix64 rng(hash_combine(seed, static_cast<uint64_t>(epoch)));
    for (size_t i = size; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  }
  if (repeats <= 1) return order;
  std::vector<size_t> repeated;
  repeated.reserve(size);
  for (size_t i = 0; repeated.size() < size; ++i)
    for (size_t k = 0; k < repeats && repeated.size() < size; ++k) repeated.push_back(order[i] + k * size);
  return repeated;
}

size_t EpochSampler::batches_per_epoch() const {
  return options_.drop_last ? options_.size / options_.batch_size
                            : (options_.size + options_.batch_size - 1) / options_.batch_size;
}

void EpochSampler::reset(torch::optional<size_t> new_size) {
  if (new_size && *new_size != options_.size) {
    options_.size = *new_size;
    order_ = epoch_order(options_.size, options_.seed, options_.epoch, options_.shuffle, options_.repeats,
                         options_.balanced.get());
  }
  position_ = std::min(order_.size(), options_.start_batch * options_.batch_size);
}

torch::optional<std::vector<size_t>> EpochSampler::next(size_t /*batch_size: ours is fixed at construction*/) {
  const size_t left = order_.size() - position_;
  if (left == 0 || (options_.drop_last && left < options_.batch_size)) return torch::nullopt;
  const size_t take = std::min(left, options_.batch_size);
  std::vector<size_t> batch;
  if (options_.repeats > 1 && options_.world > 1) {
    // Every world-th image from the rank's own offset: consecutive copies of an image go to different ranks.
    // The counts are batch_share's.
    for (size_t i = options_.rank; i < take; i += options_.world) batch.push_back(order_[position_ + i]);
  } else {
    const BatchShare share = batch_share(take, options_.rank, options_.world);
    const auto first = order_.begin() + static_cast<std::ptrdiff_t>(position_ + share.first);
    batch.assign(first, first + static_cast<std::ptrdiff_t>(share.count));
  }
  position_ += take;
  return batch;
}

void EpochSampler::save(torch::serialize::OutputArchive& archive) const {
  archive.write("epoch", torch::tensor(options_.epoch, torch::kInt64), /*is_buffer=*/true);
  archive.write("position", torch::tensor(static_cast<int64_t>(position_), torch::kInt64), true);
}

void EpochSampler::load(torch::serialize::InputArchive& archive) {
  torch::Tensor epoch, position;
  archive.read("epoch", epoch, true);
  archive.read("position", position, true);
  options_.epoch = epoch.item<int64_t>();
  order_ = epoch_order(options_.size, options_.seed, options_.epoch, options_.shuffle, options_.repeats,
                       options_.balanced.get());
  position_ = static_cast<size_t>(position.item<int64_t>());
}

}  // namespace trainer
