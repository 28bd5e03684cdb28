#include "trainer/data/loader/loaders.hpp"

#include <algorithm>

namespace trainer {

namespace {

// The plans of one sampler's epoch over one dataset.
PlanSource epoch_plans(std::shared_ptr<const BatchDataset> dataset, std::shared_ptr<EpochSampler> sampler,
                       size_t batch_size) {
  sampler->reset();
  return [dataset = std::move(dataset), sampler = std::move(sampler), batch_size]() -> std::optional<BatchPlan> {
    auto indices = sampler->next(batch_size);
    if (!indices) return std::nullopt;
    return BatchPlan{dataset, std::move(*indices)};
  };
}

}  // namespace

std::unique_ptr<Loader> make_loader(BatchDataset dataset, EpochSampler sampler, size_t batch_size, size_t workers,
                                    size_t prefetch) {
  return std::make_unique<Loader>(epoch_plans(std::make_shared<const BatchDataset>(std::move(dataset)),
                                              std::make_shared<EpochSampler>(std::move(sampler)), batch_size),
                                  workers, prefetch);
}

namespace {

std::shared_ptr<const ClassMembers> class_members(const ImageSource& source) {
  auto members = std::make_shared<ClassMembers>(source.class_names().size());
  for (size_t i = 0; i < source.size(); ++i) {
    const auto label = static_cast<size_t>(source.label(i));
    if (label >= members->size()) members->resize(label + 1);
    (*members)[label].push_back(i);
  }
  return members;
}

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
  auto augment = std::make_shared<const SampleAugment>(data.augment);
  const auto batch_size = static_cast<size_t>(data.batch_size);
  const auto balanced = data.sampler == SamplerKind::balanced ? class_members(*source) : nullptr;
  // Epoch after epoch: each its own order and augmentation draws (a dataset per epoch), all in one pipeline.
  struct Epochs {
    int64_t epoch;
    PlanSource plans;
  };
  auto state = std::make_shared<Epochs>(Epochs{o.epoch - 1, nullptr});
  PlanSource plans = [=]() -> std::optional<BatchPlan> {
    while (true) {
      if (state->plans)
        if (auto plan = state->plans()) return plan;
      if (++state->epoch >= o.epoch + o.epochs && o.epochs != kEndless) return std::nullopt;
      const size_t start = state->epoch == o.epoch ? o.start_batch : 0;
      SamplerOptions order = train_sampler_options(source->size(), data, o.drop_last, o.seed, state->epoch, start);
      order.rank = o.rank;
      order.world = o.world;
      order.balanced = balanced;
      auto dataset = std::make_shared<const BatchDataset>(source, o.pin_memory, ReadContext{o.seed, state->epoch},
                                                          o.bad, BadSlot::replace, augment, o.intake, o.profile);
      state->plans = epoch_plans(std::move(dataset), std::make_shared<EpochSampler>(order), batch_size);
      // An epoch without a batch (fewer images than a batch, with drop_last) means none in any: stop here, also
      // for an endless loader.
      if (auto plan = state->plans()) return plan;
      if (start == 0) return std::nullopt;
    }
  };
  return std::make_unique<Loader>(std::move(plans), static_cast<size_t>(data.workers),
                                  static_cast<size_t>(data.prefetch));
}

std::unique_ptr<Loader> make_eval_loader(std::shared_ptr<const ImageSource> source, size_t batch_size, size_t workers,
                                         size_t prefetch, bool pin_memory, std::shared_ptr<BadSamples> bad,
                                         std::shared_ptr<const DecodeIntake> intake,
                                         std::shared_ptr<PipelineProfile> profile) {
  SamplerOptions order;
  order.size = source->size();
  order.batch_size = batch_size;
  order.shuffle = false;
  // Unreadable images are dropped, not replaced: a duplicate of another image would bias the figures.
  return make_loader(BatchDataset(std::move(source), pin_memory, {}, std::move(bad), BadSlot::drop, nullptr,
                                  std::move(intake), std::move(profile)),
                     EpochSampler(order), batch_size, workers, prefetch);
}

}  // namespace trainer
