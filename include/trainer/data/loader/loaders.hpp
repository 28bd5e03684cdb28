// The loaders a run reads through: a BatchPipeline (batch_pipeline.hpp) over BatchDatasets in an EpochSampler's
// order. Training, evaluation and the benchmarks all build theirs here, so a benchmark reads exactly what a run
// reads. A training loader may span several epochs: the next epoch's first batches are made while this one
// drains.
//   TrainLoaderOptions o;  o.seed = seed;  o.epoch = epoch;  o.epochs = 3;  o.bad = bad;
//   auto loader = make_train_loader(source, config.data, o);
//   for_each_batch(*loader, [&](ImageBatch& b) { ...; return true; });   // false stops early
//   for_each_batch(*loader, n, f);                                       // at most n batches (one epoch's)
//   auto eval = make_eval_loader(source, /*batch_size=*/256, /*workers=*/2, /*prefetch=*/4, pin_memory, bad);
#pragma once

#include <cstdint>
#include <limits>
#include <memory>

#include "trainer/config/config.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/loader/batch_pipeline.hpp"

namespace trainer {

using Loader = BatchPipeline;

// `workers` threads keep up to `prefetch` batches in the making ahead of the caller; 0 workers make each batch on
// the calling thread. The batches of `sampler`'s epoch, read from `dataset`.
std::unique_ptr<Loader> make_loader(BatchDataset dataset, EpochSampler sampler, size_t batch_size, size_t workers,
                                    size_t prefetch = 4);

// Batches of a training epoch over `images`: data.batch_size, with the last partial one dropped when `drop_last`
// (data.drop_last resolved by last_batch_rule(), data/last_batch.hpp).
size_t train_batches_per_epoch(size_t images, const DataConfig& data, bool drop_last);

inline constexpr int64_t kEndless = -1;

struct TrainLoaderOptions {
  bool drop_last = false;   // data.drop_last as last_batch_rule() resolved it
  uint64_t seed = 0;        // run.seed: order and augmentation are functions of (seed, epoch, index)
  int64_t epoch = 0;        // the first epoch
  int64_t epochs = 1;       // epochs the loader runs through, one after the other, without a pause;
                            // kEndless: until the caller stops taking batches (benchmarks)
  size_t start_batch = 0;   // > 0: the first epoch continues from this batch (a resumed epoch)
  bool pin_memory = false;  // CUDA: batches in page-locked memory, for copies that overlap compute
  // data.decode cuda: the run's decoder, whose JPEGs the workers leave encoded (null: they decode everything)
  std::shared_ptr<const DecodeIntake> intake;
  std::shared_ptr<BadSamples> bad;  // unreadable images are recorded here and replaced (null: they throw)
  size_t rank = 0;                  // data-parallel: this rank reads its share of every global batch
  size_t world = 1;
  std::shared_ptr<PipelineProfile> profile;  // `trainer bench data`: where the workers' time goes (null in runs)
};

// The training batches of epochs [epoch, epoch + epochs) over `source`, batched and augmented as `data` says.
std::unique_ptr<Loader> make_train_loader(std::shared_ptr<const ImageSource> source, const DataConfig& data,
                                          const TrainLoaderOptions& options);

// The eval loader: every image once, in order; an unreadable image is recorded in `bad` and left out of the
// figures (kDroppedLabel), or throws without `bad`.
std::unique_ptr<Loader> make_eval_loader(std::shared_ptr<const ImageSource> source, size_t batch_size, size_t workers,
                                         size_t prefetch, bool pin_memory, std::shared_ptr<BadSamples> bad,
                                         std::shared_ptr<const DecodeIntake> intake = nullptr,
                                         std::shared_ptr<PipelineProfile> profile = nullptr);

// Calls `f(batch)` for each of the next `count` batches (all that are left by default) until it returns false.
// Batches not taken stay in the loader for the next call.
template <class F>
void for_each_batch(Loader& loader, size_t count, F&& f) {
  for (size_t taken = 0; taken < count; ++taken) {
    std::optional<ImageBatch> batch = loader.next();
    if (!batch || !f(*batch)) return;
  }
}
template <class F>
void for_each_batch(Loader& loader, F&& f) {
  for_each_batch(loader, std::numeric_limits<size_t>::max(), f);
}

}  // namespace trainer
