#include "trainer/data/device/batch_decoder.hpp"

#include <algorithm>

#include "trainer/util/error.hpp"

namespace trainer {

namespace F = torch::nn::functional;

namespace {

F::InterpolateFuncOptions resize_options(Interpolation interpolation, int64_t height, int64_t width) {
  auto o = F::InterpolateFuncOptions().size(std::vector<int64_t>{height, width});
  switch (interpolation) {
    case Interpolation::nearest: return o.mode(torch::kNearest);
    case Interpolation::bicubic: return o.mode(torch::kBicubic).align_corners(false).antialias(true);
    case Interpolation::bilinear: break;
  }
  return o.mode(torch::kBilinear).align_corners(false).antialias(true);
}

// uint8 [h, w, 3] -> resized [height, width, 3], as torchvision's tensor resize: float, interpolate, round, clamp.
// Left in float (whole numbers in [0, 255]): the copy into the uint8 slot converts it exactly, one launch fewer.
torch::Tensor resize_rgb(const torch::Tensor& rgb, Interpolation interpolation, int64_t height, int64_t width) {
  if (rgb.size(0) == height && rgb.size(1) == width) return rgb;
  const auto x = rgb.permute({2, 0, 1}).unsqueeze(0).to(torch::kFloat);
  return F::interpolate(x, resize_options(interpolation, height, width))
      .round_()
      .clamp_(0, 255)
      .squeeze(0)
      .permute({1, 2, 0});
}

class CpuBatchDecoder final : public BatchDecoder {
 public:
  bool takes(EncodedImage&) const override { return true; }
  void decode(ImageBatch& batch, const BadSlots& bad) override {
    std::vector<size_t> deferred;
    for (size_t b = 0; b < batch.encoded.size(); ++b)
      if (batch.encoded[b].deferred()) deferred.push_back(b);
    const auto failed = static_cast<int64_t>(finish_on_cpu(batch, deferred, bad));
    cpu_ += static_cast<int64_t>(deferred.size()) - failed;
    failed_ += failed;
  }
  std::string describe() const override { return "CPU"; }
};

}  // namespace

DecodeCounts BatchDecoder::take_counts() {
  DecodeCounts c;
  c.gpu = gpu_.exchange(0);
  c.cpu = cpu_.exchange(0);
  c.refused = refused_.exchange(0);
  c.failed = failed_.exchange(0);
  c.failed_calls = failed_calls_.exchange(0);
  return c;
}

#ifndef TRAINER_NVJPEG
bool nvjpeg_built() { return false; }
std::unique_ptr<BatchDecoder> make_nvjpeg_decoder(const torch::Device&, std::shared_ptr<spdlog::logger>,
                                                  NvjpegBackend) {
  throw UsageError(
      "data.decode cuda: this trainer was built without nvJPEG (nvjpeg.h was not found when it was "
      "built; Debian: nvidia-cuda-dev, with the CUDA build of LibTorch); use data.decode auto or cpu");
}
#endif

std::unique_ptr<BatchDecoder> make_batch_decoder(DecodeDevice where, const torch::Device& device,
                                                 std::shared_ptr<spdlog::logger> log, NvjpegBackend backend) {
  if (where == DecodeDevice::cuda) return make_nvjpeg_decoder(device, std::move(log), backend);
  return std::make_unique<CpuBatchDecoder>();
}

void render_decoded(const torch::Tensor& decoded, int64_t top, int64_t left, const EncodedImage& e,
                    torch::Tensor slot) {
  const int64_t size_h = slot.size(0), size_w = slot.size(1);
  torch::Tensor out;
  if (e.plan.resized.width > 0) {
    // Eval: the whole image resized, then the center crop of that (torchvision's Resize + CenterCrop).
    const ResizedCrop& r = e.plan.resized;
    out =
        resize_rgb(decoded, e.spec.interpolation, r.height, r.width).narrow(0, r.top, size_h).narrow(1, r.left, size_w);
  } else {
    // Train: the box (whole pixels) cut out of the decoded region, resized to the output (resized_crop).
    const CropBox& box = e.plan.box;
    const auto crop = decoded.narrow(0, static_cast<int64_t>(box.top) - top, static_cast<int64_t>(box.height))
                          .narrow(1, static_cast<int64_t>(box.left) - left, static_cast<int64_t>(box.width));
    out = resize_rgb(crop, e.spec.interpolation, size_h, size_w);
  }
  if (e.plan.flip) out = out.flip({1});
  slot.copy_(out, /*non_blocking=*/true);  // float or uint8 whole numbers into uint8: exact
}

size_t finish_on_cpu(ImageBatch& batch, const std::vector<size_t>& slots, const BadSlots& bad) {
  std::vector<std::pair<size_t, std::string>> failed;
  for (size_t b : slots) {
    try {
      // Rendered on the host, then copied into the slot (on any device): a synchronous copy from pageable memory.
      const auto slot = batch.images[static_cast<int64_t>(b)];
      auto host = torch::empty({slot.size(0), slot.size(1), 3}, torch::kUInt8);
      cv::Mat out(static_cast<int>(slot.size(0)), static_cast<int>(slot.size(1)), CV_8UC3, host.data_ptr<uint8_t>());
      render_encoded(batch.encoded[b], out);
      slot.copy_(host);
    } catch (const DataError& e) {
      failed.emplace_back(b, e.message());
    }
  }
  settle_failed_slots(batch, failed, bad);
  batch.encoded.clear();
  return failed.size();
}

void settle_failed_slots(ImageBatch& batch, const std::vector<std::pair<size_t, std::string>>& failed,
                         const BadSlots& bad) {
  if (failed.empty()) return;
  const auto n = static_cast<int64_t>(batch.images.size(0));
  std::vector<bool> bad_slot(static_cast<size_t>(n), false);
  for (const auto& [b, message] : failed) {
    bad_slot[b] = true;
    if (!bad.record) throw DataError(message);
    bad.record->record(batch.encoded[b].index, message);
  }
  for (const auto& [b, message] : failed) {
    const auto slot = static_cast<int64_t>(b);
    if (bad.slot == BadSlot::drop) {
      batch.images[slot].zero_();
      batch.labels[slot].fill_(kDroppedLabel);
      continue;
    }
    // The next slot that decoded, cyclically: fixed by the batch alone, so a rerun makes the same choice.
    int64_t other = -1;
    for (int64_t k = 1; k < n && other < 0; ++k)
      if (!bad_slot[static_cast<size_t>((slot + k) % n)]) other = (slot + k) % n;
    if (other < 0)
      throw DataError("no image of a batch of " + std::to_string(n) + " could be decoded; the last: " + message);
    batch.images[slot].copy_(batch.images[other]);
    batch.labels[slot].copy_(batch.labels[other]);
  }
}

}  // namespace trainer
