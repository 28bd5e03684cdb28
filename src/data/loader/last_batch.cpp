#include "trainer/data/loader/last_batch.hpp"

#include "trainer/util/error.hpp"

namespace trainer {

LastBatch last_batch_rule(size_t images, const DataConfig& data, int64_t world_size, bool batch_norm) {
  const auto batch = static_cast<size_t>(data.batch_size);
  const size_t partial = images % batch;
  if (partial == 0) return {};
  const auto world = static_cast<size_t>(world_size);
  const size_t smallest_share = partial / world;
  const size_t needed = batch_norm ? 2 : 1;
  const std::string what = "the last batch of each epoch holds " + std::to_string(partial) + " of " +
                           std::to_string(images) + " training images" +
                           (world > 1 ? " (" + std::to_string(smallest_share) + " per process at the least)" : "");
  const std::string why =
      batch_norm ? "a model with BatchNorm needs 2 images per process to train" : "every process needs an image";
  if (data.drop_last == Switch::on) return {true, what + "; it is dropped (data.drop_last true)"};
  const bool too_small = smallest_share < needed;
  if (data.drop_last == Switch::off) {
    if (too_small)
      throw ConfigError("data.drop_last: false keeps a last batch too small to train on: " + what + ", and " + why +
                        "; set it to auto or true, or change data.batch_size");
    return {false, what + "; it is kept (data.drop_last false)"};
  }
  if (!too_small) return {false, what + "; it is kept (data.drop_last auto)"};
  if (images < batch)
    throw ConfigError("data.batch_size: " + std::to_string(batch) + " leaves a single batch of " +
                      std::to_string(images) + " training images, too small to train on (" + why +
                      "); lower data.batch_size");
  return {true, what + ", and " + why + ": it is dropped (data.drop_last auto)"};
}

}  // namespace trainer
