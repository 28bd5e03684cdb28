#include "trainer/data/loader/batch_dataset.hpp"

#include <algorithm>
#include <stdexcept>

#include "trainer/util/clock.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/hash.hpp"
#include "trainer/util/reused_memory.hpp"

namespace trainer {

namespace {

// Sample replacements for a bad slot: a fixed sequence per (seed, epoch, slot sample).
constexpr int kReplacementAttempts = 16;

}  // namespace

BatchDataset::BatchDataset(std::shared_ptr<const ImageSource> source, bool pin_memory, ReadContext context,
                           std::shared_ptr<BadSamples> bad, BadSlot bad_slot,
                           std::shared_ptr<const SampleAugment> augment, std::shared_ptr<const DecodeIntake> intake,
                           std::shared_ptr<PipelineProfile> profile)
    : source_(std::move(source)),
      shape_(source_->shape()),
      pin_memory_(pin_memory),
      context_(context),
      bad_(std::move(bad)),
      bad_slot_(bad_slot),
      augment_(std::move(augment)),
      intake_(std::move(intake)),
      profile_(std::move(profile)) {
  if (augment_ && !augment_->active()) augment_.reset();
  if (intake_ && augment_ && augment_->pixels())
    throw std::logic_error("pixel augmentations need the CPU decode (choose_decode falls back to it)");
}

ImageBatch BatchDataset::allocate(size_t n, ImageBatch spare, size_t room) const {
  const auto start = Clock::now();
  const auto count = static_cast<int64_t>(n);
  auto options = torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(pin_memory_);
  // Pinned batches come from LibTorch's caching host allocator, which reuses a block only once the copies that
  // read it have finished on the device: taking one back here could overwrite a batch still in transfer.
  if (pin_memory_) spare = ImageBatch{};
  const bool offered = spare.images.defined();
  if (!offered && !pin_memory_ && room > n) {
    const auto r = static_cast<int64_t>(room);
    spare = ImageBatch{torch::empty({r, shape_.height, shape_.width, shape_.channels}, options),
                       torch::empty({r}, options.dtype(torch::kInt64)),
                       {}};
  }
  ImageBatch batch{in_memory_of(spare.images, {count, shape_.height, shape_.width, shape_.channels}, options),
                   in_memory_of(spare.labels, {count}, options.dtype(torch::kInt64)),
                   {}};
  if (augment_ && augment_->erases())
    batch.erase = torch::zeros({count, kEraseColumns}, options.dtype(torch::kInt64));  // pinned with the images
  if (intake_) batch.encoded.resize(n);
  if (profile_)
    profile_->add_batch_memory(seconds_since(start),
                               !offered || !batch.images.storage().is_alias_of(spare.images.storage()));
  return batch;
}

void BatchDataset::fill(ImageBatch& batch, size_t b, size_t sample) const {
  const int h = static_cast<int>(shape_.height), w = static_cast<int>(shape_.width);
  const int type = CV_8UC(static_cast<int>(shape_.channels));
  const size_t sample_bytes = static_cast<size_t>(shape_.height * shape_.width * shape_.channels);
  uint8_t* out = batch.images.data_ptr<uint8_t>() + b * sample_bytes;
  // The slot is a view of the batch tensor: sources write the final pixels there, with no copy after.
  cv::Mat slot(h, w, type, out);
  const size_t size = source_->size();
  ReadContext context = context_;
  context.copy = static_cast<int64_t>(sample / size);
  SampleTimes times;
  if (profile_) context.times = &times;
  const size_t wanted = sample % size;
  size_t index = wanted;
  bool dropped = false;
  for (int attempt = 1;; ++attempt) {
    try {
      if (intake_) {
        EncodedImage& e = batch.encoded[b];
        e = EncodedImage{};  // a failed attempt leaves nothing behind
        // A file the decoder refuses (its support check, in this worker) is decoded here, as the CPU path would.
        if (source_->read_or_defer(index, context, slot, e) && !intake_->takes(e)) {
          const EncodedImage refused = std::move(e);
          e = EncodedImage{};
          render_encoded(refused, slot);
        }
      } else {
        source_->read_into(index, context, slot);
      }
      break;
    } catch (const DataError& e) {
      if (!bad_) throw;
      bad_->record(index, e.message());
      if (bad_slot_ == BadSlot::drop) {
        slot.setTo(cv::Scalar::all(0));
        dropped = true;
        break;
      }
      if (attempt == kReplacementAttempts)
        throw DataError("sample " + std::to_string(wanted) + " and " + std::to_string(attempt - 1) +
                        " replacements could not be read; the last: " + e.message());
      const uint64_t h64 =
          hash_combine(hash_combine(context_.seed ^ 0xBAD5A3B1Eull, static_cast<uint64_t>(context_.epoch)),
                       hash_combine(wanted, static_cast<uint64_t>(attempt)));
      index = static_cast<size_t>(h64 % source_->size());
    }
  }
  if (slot.data != out)
    throw std::logic_error("image source reallocated the batch slot of sample " + std::to_string(wanted));
  batch.labels.data_ptr<int64_t>()[b] = dropped ? kDroppedLabel : source_->label(index);
  if (augment_ && !dropped) {
    // Drawn from the slot's sample and copy (not a replacement's), like the crop of a replaced image.
    const auto start = profile_ ? Clock::now() : Clock::time_point();
    const uint64_t seed = sample_seed(context, wanted);
    if (augment_->pixels()) augment_->apply(slot, seed);
    if (augment_->erases()) {
      const EraseBox e = augment_->plan_erase(h, w, seed);
      auto* row = batch.erase.data_ptr<int64_t>() + static_cast<int64_t>(b) * kEraseColumns;
      row[0] = e.top, row[1] = e.left, row[2] = e.height, row[3] = e.width, row[4] = e.noise_seed;
    }
    if (profile_) times.augment_s = seconds_since(start);
  }
  if (profile_) profile_->add_sample(times);
}

void BatchDataset::prefetch(const std::vector<size_t>& indices) const {
  const size_t size = source_->size();
  std::vector<size_t> samples;
  samples.reserve(indices.size());
  for (size_t i : indices) samples.push_back(i % size);  // copy k of sample i is index i + k * size
  source_->prefetch(samples);
}

ImageBatch BatchDataset::get_batch(const std::vector<size_t>& indices) const {
  ImageBatch batch = allocate(indices.size(), {});
  for (size_t b = 0; b < indices.size(); ++b) fill(batch, b, indices[b]);
  return batch;
}

}  // namespace trainer
