#include "trainer/data/loaders.hpp"

#include <algorithm>

namespace trainer {

std::unique_ptr<Loader> make_loader(BatchDataset dataset, EpochSampler sampler, size_t batch_size, size_t workers,
                                    size_t prefetch) {
  // enforce_ordering keeps batches in sampler order whichever worker finishes first. max_jobs bounds the
  // batches in flight (queued, being prepared or ready); every worker needs one to stay busy. Without workers
  // it must stay 0: LibTorch would queue that many batches for threads that do not exist, and lose them.
  auto options = torch::data::DataLoaderOptions(batch_size)
                     .workers(workers)
                     .max_jobs(workers == 0 ? 0 : std::max(prefetch, workers))
                     .enforce_ordering(true);
  return std::make_unique<Loader>(std::move(dataset), std::move(sampler), std::move(options));
}

namespace {

SamplerOptions train_sampler_options(size_t images, const DataConfig& data, bool drop_last, uint64_t seed,
                                     int64_t epoch, size_t start_batch) {
  SamplerOptions o{images, static_cast<size_t>(data.batch_size), seed, epoch, data.shuffle, drop_last, start_batch};
  o.repeats = static_cast<size_t>(data.repeated_augmentation.repeats);
  return o;
}

}  // namespace

size_t train_batches_per_epoch(size_t images, const DataConfig& data, bool drop_last) {
  return EpochSampler(train_sampler_options(images, data, drop_last, 0, 0, 0)).batches_per_epoch();
}

std::unique_ptr<Loader> make_train_loader(std::shared_ptr<const ImageSource> source, const DataConfig& data,
                                          const TrainLoaderOptions& o) {
  const size_t images = source->size();
  SamplerOptions order = train_sampler_options(images, data, o.drop_last, o.seed, o.epoch, o.start_batch);
  order.rank = o.rank;
  order.world = o.world;
  auto augment = std::make_shared<const SampleAugment>(data.augment);
  return make_loader(
      BatchDataset(std::move(source), o.pin_memory, {o.seed, o.epoch}, o.bad, BadSlot::replace, std::move(augment)),
      EpochSampler(order), static_cast<size_t>(data.batch_size), static_cast<size_t>(data.workers),
      static_cast<size_t>(data.prefetch));
}

std::unique_ptr<Loader> make_eval_loader(std::shared_ptr<const ImageSource> source, size_t batch_size, size_t workers,
                                         size_t prefetch, bool pin_memory, std::shared_ptr<BadSamples> bad) {
  SamplerOptions order;
  order.size = source->size();
  order.batch_size = batch_size;
  order.shuffle = false;
  // Unreadable images are dropped, not replaced: a duplicate of another image would bias the figures.
  return make_loader(BatchDataset(std::move(source), pin_memory, {}, std::move(bad), BadSlot::drop),
                     EpochSampler(order), batch_size, workers, prefetch);
}

}  // namespace trainer
