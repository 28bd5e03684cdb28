// The loaders a run reads through: LibTorch's DataLoader over a BatchDataset and an EpochSampler. Training,
// evaluation and the benchmarks all build theirs here, so a benchmark reads exactly what a run reads.
//   TrainLoaderOptions o;  o.seed = seed;  o.epoch = epoch;  o.bad = bad;
//   auto loader = make_train_loader(source, config.data, o);
//   for_each_batch(*loader, [&](ImageBatch& b) { ...; return true; });   // false stops early
//   auto eval = make_eval_loader(source, /*batch_size=*/256, /*workers=*/2, /*prefetch=*/4, pin_memory, bad);
#pragma once

#include <memory>

#include "trainer/config/config.hpp"
#include "trainer/data/batch_dataset.hpp"

namespace trainer {

using Loader = torch::data::StatelessDataLoader<BatchDataset, EpochSampler>;

// `workers` threads keep up to `prefetch` batches ready ahead of the training step; 0 workers prepare them on
// the calling thread.
std::unique_ptr<Loader> make_loader(BatchDataset dataset, EpochSampler sampler, size_t batch_size, size_t workers,
                                    size_t prefetch = 4);

// Batches of a training epoch over `images`: data.batch_size, with the last partial one dropped when `drop_last`
// (data.drop_last resolved by last_batch_rule(), data/last_batch.hpp).
size_t train_batches_per_epoch(size_t images, const DataConfig& data, bool drop_last);

struct TrainLoaderOptions {
  bool drop_last = false;  // data.drop_last as last_batch_rule() resolved it
  uint64_t seed = 0;       // run.seed: order and augmentation are functions of (seed, epoch, index)
  int64_t epoch = 0;
  size_t start_batch = 0;           // > 0: a resumed epoch continues from this batch
  bool pin_memory = false;          // CUDA: batches in page-locked memory, for copies that overlap compute
  std::shared_ptr<BadSamples> bad;  // unreadable images are recorded here and replaced (null: they throw)
  size_t rank = 0;                  // data-parallel: this rank reads its share of every global batch
  size_t world = 1;
};

// The training loader of one epoch over `source`, batched and augmented as `data` says.
std::unique_ptr<Loader> make_train_loader(std::shared_ptr<const ImageSource> source, const DataConfig& data,
                                          const TrainLoaderOptions& options);

// The eval loader: every image once, in order; an unreadable image is recorded in `bad` and left out of the
// figures (kDroppedLabel), or throws without `bad`.
std::unique_ptr<Loader> make_eval_loader(std::shared_ptr<const ImageSource> source, size_t batch_size, size_t workers,
                                         size_t prefetch, bool pin_memory, std::shared_ptr<BadSamples> bad);

// Calls `f(batch)` for each batch until it returns false. A loader thread's error arrives wrapped in LibTorch's
// WorkerException: the original is rethrown, so a DataError stays a one-line user error.
template <class F>
void for_each_batch(Loader& loader, F&& f) {
  try {
    for (ImageBatch& batch : loader)
      if (!f(batch)) return;
  } catch (const torch::data::WorkerException& e) {
    std::rethrow_exception(e.original_exception);
  }
}

}  // namespace trainer
