// The last stage of a batch whose JPEGs were left encoded (data.decode cuda, ImageBatch::encoded): decodes them
// and renders each into its slot of the batch's images, on the device those are on. Two implementations:
//   - nvJPEG (CUDA builds with nvjpeg.h): the batch in one nvjpegDecodeBatchedEx call on the GPU's hardware JPEG
//     engines where it has them (A100, H100, H200), decoding only the crop's region, else on the GPU's hybrid
//     decoder; then render_decoded_all() on the GPU. Its support check runs in the loader workers (takes()), so a
//     file it refuses never reaches it; a batch it fails on is decoded by the CPU path instead.
//   - the CPU: decode_image() + render(), exactly the pixels of the CPU path; the reference of the tests and the
//     fallback per image.
// A file that neither can decode is recorded in the loop's bad-sample list; its slot takes another slot's image
// and label in a training batch (the batch stays full, as the CPU path's replacement does) or is dropped in an
// evaluation batch. The decode stage (decode_stage.hpp) calls decode() on its own thread; a run has one decoder.
//   RunDecoder d = open_run_decoder(config, device, log);   // decode_choice.hpp
//   d.decoder->decode(batch, {bad, BadSlot::replace});     // batch.images on the device, after the copy
#pragma once

#include <spdlog/logger.h>
#include <torch/torch.h>

#include <atomic>
#include <memory>
#include <string>

#include "trainer/config/config.hpp"
#include "trainer/data/loader/batch_dataset.hpp"
#include "trainer/data/pixels/encoded_image.hpp"

namespace trainer {

// Where a loop's undecodable files go: its bad-sample record (null: the error ends the loop) and the slot rule.
struct BadSlots {
  std::shared_ptr<BadSamples> record;
  BadSlot slot = BadSlot::replace;
};

// Images by where they were decoded, since the last take_counts(): the epoch line and metrics.jsonl.
struct DecodeCounts {
  int64_t gpu = 0;           // by nvJPEG (hardware or hybrid)
  int64_t cpu = 0;           // by the CPU in the decode stage, after a failed batched call
  int64_t refused = 0;       // refused by the support check, decoded by a loader worker
  int64_t failed = 0;        // by neither: recorded as bad samples
  int64_t failed_calls = 0;  // batched calls nvJPEG failed on
  int64_t blank = 0;         // reported decoded by nvJPEG but left unwritten: decoded by the CPU (within `cpu`)
  int64_t total() const { return gpu + cpu + refused + failed; }
};

// nvJPEG's backend: the JPEG engines where the GPU has them, else the hybrid decoder; or the hybrid decoder on
// any GPU (a switch for the tests, which must see both).
enum class NvjpegBackend { automatic, hybrid };

class BatchDecoder : public DecodeIntake {
 public:
  // Fills every deferred slot of `batch` (images uint8 [B, H, W, C], labels [B], on this decoder's device) and
  // clears batch.encoded. Work is queued on the current stream; the call returns once the host may reuse what
  // it read (the decode stage's thread waits here, never the training thread).
  virtual void decode(ImageBatch& batch, const BadSlots& bad) = 0;
  // For the run log: "nvJPEG on cuda:0, hardware backend ..." or "CPU".
  virtual std::string describe() const = 0;
  // The counts since the last call, which restarts them.
  DecodeCounts take_counts();

 protected:
  // Counted from the stage's thread (decode) and the loader workers (takes): atomics.
  mutable std::atomic<int64_t> gpu_{0}, cpu_{0}, refused_{0}, failed_{0}, failed_calls_{0}, blank_{0};
};

// DecodeDevice::cuda: nvJPEG on `device` (UsageError in a build without it); otherwise the CPU decoder.
// `log` (may be null) hears of a failed batched call, once per decoder.
std::unique_ptr<BatchDecoder> make_batch_decoder(DecodeDevice where, const torch::Device& device,
                                                 std::shared_ptr<spdlog::logger> log = nullptr,
                                                 NvjpegBackend backend = NvjpegBackend::automatic);

// Whether this trainer was built with nvJPEG (nvjpeg.h and libnvjpeg found in a CUDA build).
bool nvjpeg_built();

// nvJPEG on `device` (nvjpeg_decoder.cpp); UsageError in a build without it.
std::unique_ptr<BatchDecoder> make_nvjpeg_decoder(const torch::Device& device, std::shared_ptr<spdlog::logger> log,
                                                  NvjpegBackend backend);

// The largest region the GPU decodes and renders, in source pixels: rendering makes a float copy of the region
// (12 bytes a pixel, 384 MiB here), so a larger one (an 8K x 8K scan) is refused in the worker and decoded there,
// at the plan's reduced size, in bounded memory. Renders of one size go through one resize of at most this many
// pixels.
inline constexpr int64_t kMaxGpuRegionPixels = int64_t{32} << 20;

// A decoded region of a deferred slot's source image: uint8 RGB [h, w, 3] on any device, starting at (top, left)
// in source pixels and holding the plan's crop.
struct DecodedRegion {
  torch::Tensor pixels;
  int64_t top = 0, left = 0;
  size_t slot = 0;
};

// The GPU path's geometry, on any device: each region's crop resized to its slot's size (antialiased, as
// torchvision's tensor transforms: resize then round and clamp), flipped if planned, written into its slot of
// batch.images. Train plans resize their box; eval plans resize the whole image, then cut the center crop.
// Crops of one size and output are resized in one call (the same bytes as one call each, fewer launches).
void render_decoded_all(const std::vector<DecodedRegion>& regions, ImageBatch& batch);

// The regions of a batched call's output that hold nothing but its zero fill: `pixels` is the call's output (uint8,
// on any device), region i its lengths[i] bytes from offsets[i]. An image the engine reports decoded but leaves
// unwritten is all zeros, so kBlankSamples bytes spread evenly over each region (every byte of a smaller one) are
// read on the device and one small copy brings back each region's largest. A photo that is black at every sample
// is decoded again by the CPU: that costs time, never pixels.
inline constexpr int64_t kBlankSamples = 256;
std::vector<size_t> blank_regions(const torch::Tensor& pixels, const std::vector<int64_t>& offsets,
                                  const std::vector<int64_t>& lengths);

// How every decoder ends a batch: the deferred `slots` it leaves to the CPU (all of them for the CPU decoder;
// those of a batch nvJPEG failed on) decoded exactly as the CPU path would (render_encoded), the ones no decoder
// could read settled (settle_failed_slots), and batch.encoded cleared. Returns how many failed.
size_t finish_on_cpu(ImageBatch& batch, const std::vector<size_t>& slots, const BadSlots& bad);

// Deferred slots that could not be decoded: recorded in `bad`, then dropped (eval) or given another slot's image
// and label (train). Throws DataError when `bad` has no record, or when no slot of the batch could be decoded.
void settle_failed_slots(ImageBatch& batch, const std::vector<std::pair<size_t, std::string>>& failed,
                         const BadSlots& bad);

}  // namespace trainer
