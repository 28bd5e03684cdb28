// Batches for the loaders (loaders.hpp): samples are written straight into one uint8 NHWC tensor
// (pinned when the model is on CUDA); normalisation happens later, on the device (see to_model_input).
// A sample that cannot be read is recorded in `bad`; for training its slot is filled with another sample,
// chosen by (seed, epoch, index), so batches stay full and deterministic; for evaluation (BadSlot::drop) the
// slot is zeroed and labelled kDroppedLabel, so that metrics leave it out instead of counting a duplicate.
// Without `bad` the error propagates. Training batches also go through `augment` (sample_augment.hpp).
// Repeated augmentation: an index i + k * size() is copy k of sample i, read with its own augmentation draws.
// With an `intake` (data.decode cuda) the JPEGs the GPU decoder takes are read and planned but left encoded, for
// the decode stage; the ones it refuses are decoded here. Runs build their loaders through loaders.hpp.
//   BatchDataset ds(source, /*pin_memory=*/false, {seed, epoch}, bad);
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "trainer/data/loader/epoch_sampler.hpp"
#include "trainer/data/loader/pipeline_profile.hpp"
#include "trainer/data/pixels/encoded_image.hpp"
#include "trainer/data/pixels/sample_augment.hpp"
#include "trainer/data/sources/bad_samples.hpp"
#include "trainer/data/sources/image_source.hpp"

namespace trainer {

struct ImageBatch {
  torch::Tensor images;  // uint8 [B, H, W, C]
  torch::Tensor labels;  // int64 [B] (pinned with the images)
  torch::Tensor erase;   // random erasing: int64 [B, kEraseColumns] on the CPU; undefined when off
  // Decode on the GPU: per slot, the sample left encoded for the batch decoder (batch_decoder.hpp), or an empty
  // entry where the worker decoded it (not a JPEG the GPU takes). Empty when the workers decode everything.
  std::vector<EncodedImage> encoded = {};
};

// Label of a slot whose image could not be read under BadSlot::drop.
constexpr int64_t kDroppedLabel = -1;
enum class BadSlot { replace, drop };

class BatchDataset {
 public:
  BatchDataset(std::shared_ptr<const ImageSource> source, bool pin_memory, ReadContext context = {},
               std::shared_ptr<BadSamples> bad = nullptr, BadSlot bad_slot = BadSlot::replace,
               std::shared_ptr<const SampleAugment> augment = nullptr,
               std::shared_ptr<const DecodeIntake> intake = nullptr,
               std::shared_ptr<PipelineProfile> profile = nullptr);
  ImageBatch get_batch(const std::vector<size_t>& indices) const;
  // The two halves of get_batch, for a pipeline that fills one batch from several threads: the empty batch of
  // `n` samples (in `spare`'s memory when it has room for them and nobody else holds it any more; never for
  // pinned batches; else a new block with room for max(n, `room`) samples, so that an epoch's smaller last
  // batch made first leaves a block a full batch can take later), and sample `index` (an entry of the
  // sampler's order) read into its slot `b`. fill() is thread-safe for distinct slots of a batch.
  ImageBatch allocate(size_t n, ImageBatch spare, size_t room = 0) const;
  void fill(ImageBatch& batch, size_t b, size_t index) const;
  // Tells the source which samples (entries of the sampler's order) a planned batch will read (ImageSource::prefetch).
  void prefetch(const std::vector<size_t>& indices) const;
  size_t size() const { return source_->size(); }

 private:
  std::shared_ptr<const ImageSource> source_;
  ImageShape shape_;
  bool pin_memory_;
  ReadContext context_;
  std::shared_ptr<BadSamples> bad_;
  BadSlot bad_slot_;
  std::shared_ptr<const SampleAugment> augment_;
  std::shared_ptr<const DecodeIntake> intake_;  // JPEGs it takes are left encoded in ImageBatch::encoded
  std::shared_ptr<PipelineProfile> profile_;    // `trainer bench data`: stage times (null in runs)
};

}  // namespace trainer
