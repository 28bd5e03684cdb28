// The last stage of a batch whose JPEGs were left encoded (data.decode cuda, ImageBatch::encoded): decodes them
// and renders each into its slot of the batch's images, on the device those are on. Two implementations:
//   - nvJPEG (CUDA builds with nvjpeg.h): the batch in one nvjpegDecodeBatchedEx call on the GPU's hardware JPEG
//     engines where it has them (A100, H100, H200), decoding only the crop's region, else on the GPU's hybrid
//     decoder; then render_decoded() on the GPU. A file nvJPEG refuses is decoded by the CPU path instead.
//   - the CPU: decode_image() + render(), exactly the pixels of the CPU path; the reference of the tests and the
//     fallback per image.
// A file that neither can decode is recorded as a bad sample; its slot takes another slot's image and label in a
// training batch (the batch stays full, as the CPU path's replacement does) or is dropped in an evaluation batch.
//   auto decoder = make_batch_decoder(DecodeDevice::cuda, device);
//   decoder->decode(batch);   // batch.images on the device, after the host-to-device copy
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "trainer/config/config.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/pixels/encoded_image.hpp"

namespace trainer {

class BatchDecoder {
 public:
  virtual ~BatchDecoder() = default;
  // Fills every deferred slot of `batch` (images uint8 [B, H, W, C], labels [B], on this decoder's device) and
  // clears batch.encoded. Work is queued on the current stream.
  virtual void decode(ImageBatch& batch) = 0;
  // For the run log: "nvJPEG, hardware backend" or "CPU".
  virtual std::string describe() const = 0;
};

// DecodeDevice::cuda: nvJPEG on `device` (UsageError in a build without it); otherwise the CPU decoder.
std::unique_ptr<BatchDecoder> make_batch_decoder(DecodeDevice where, const torch::Device& device);

// Whether this trainer was built with nvJPEG (nvjpeg.h and libnvjpeg found in a CUDA build).
bool nvjpeg_built();

// nvJPEG on `device` (nvjpeg_decoder.cpp); UsageError in a build without it.
std::unique_ptr<BatchDecoder> make_nvjpeg_decoder(const torch::Device& device);

// The GPU path's geometry, on any device: `decoded` is the uint8 RGB [h, w, 3] region of the source image that
// starts at (top, left) in source pixels and holds the plan's crop; writes the crop resized to the slot's size
// (antialiased, as torchvision's tensor transforms: resize then round and clamp), flipped if planned, into
// `slot` (uint8 [H, W, 3]). Train plans resize their box; eval plans resize the whole image, then crop.
void render_decoded(const torch::Tensor& decoded, int64_t top, int64_t left, const EncodedImage& e, torch::Tensor slot);

// How every decoder ends a batch: the deferred `slots` it leaves to the CPU (all of them for the CPU decoder; what
// nvJPEG refused) decoded exactly as the CPU path would (decode_image + render), the ones no decoder could read
// settled (settle_failed_slots), and batch.encoded cleared.
void finish_on_cpu(ImageBatch& batch, const std::vector<size_t>& slots);

// Deferred slots that could not be decoded: recorded in `batch`'s bad-sample list, then dropped (eval) or given
// another slot's image and label (train). Throws DataError when no slot of the batch could be decoded.
void settle_failed_slots(ImageBatch& batch, const std::vector<std::pair<size_t, std::string>>& failed);

}  // namespace trainer
