#include "trainer/data/device/batch_decoder.hpp"

#include <algorithm>
#include <map>
#include <tuple>

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
  c.blank = blank_.exchange(0);
  return c;
}

std::vector<size_t> blank_regions(const torch::Tensor& pixels, const std::vector<int64_t>& offsets,
                                  const std::vector<int64_t>& lengths) {
  const auto n = static_cast<int64_t>(offsets.size());
  if (n == 0) return {};
  std::vector<int64_t> rows(offsets);
  for (const int64_t length : lengths) rows.push_back(std::max<int64_t>(1, length));
  const auto where = torch::from_blob(rows.data(), {2, n}, torch::kInt64).to(pixels.device());
  const auto start = where[0].unsqueeze(1), length = where[1].unsqueeze(1);
  // Sample k of a region at its byte floor(k * length / K): evenly spread, and every byte when length <= K.
  const auto k = torch::arange(kBlankSamples, where.options()).unsqueeze(0);
  const auto index = start + torch::div(k * length, kBlankSamples, "floor");
  const auto largest = pixels.index_select(0, index.flatten()).view({n, kBlankSamples}).amax(1).cpu();
  std::vector<size_t> blank;
  for (int64_t i = 0; i < n; ++i)
    if (largest[i].item<uint8_t>() == 0) blank.push_back(static_cast<size_t>(i));
  return blank;
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

namespace {

// One image of render_decoded_all(): its crop (a view of the decoded region), the size it is resized to, and
// (eval) the center crop cut from that.
struct Render {
  torch::Tensor crop;  // uint8 [h, w, 3]
  int64_t height = 0, width = 0;
  const EncodedImage* e = nullptr;
  torch::Tensor slot;
};

Render plan_render(const DecodedRegion& d, const EncodedImage& e, torch::Tensor slot) {
  if (e.plan.resized.width > 0)  // eval: the whole image resized, then the center crop of that
    return {d.pixels, e.plan.resized.height, e.plan.resized.width, &e, std::move(slot)};
  // Train: the box (whole pixels) cut out of the decoded region, resized to the output (resized_crop).
  const CropBox& box = e.plan.box;
  const auto crop = d.pixels.narrow(0, static_cast<int64_t>(box.top) - d.top, static_cast<int64_t>(box.height))
                        .narrow(1, static_cast<int64_t>(box.left) - d.left, static_cast<int64_t>(box.width));
  return {crop, slot.size(0), slot.size(1), &e, std::move(slot)};
}

// Writes one resized image (float with whole values in [0, 255], or the uint8 crop itself) into its slot:
// the eval center crop cut, flipped if planned. The copy into the uint8 slot converts exactly.
void write_slot(torch::Tensor out, const Render& r) {
  if (r.e->plan.resized.width > 0) {
    const ResizedCrop& c = r.e->plan.resized;
    out = out.narrow(0, c.top, r.slot.size(0)).narrow(1, c.left, r.slot.size(1));
  }
  if (r.e->plan.flip) out = out.flip({1});
  r.slot.copy_(out, /*non_blocking=*/true);
}

// Renders of one size (crop and output, interpolation): resized together, float copies of at most
// kMaxGpuRegionPixels at a time.
void render_group(const std::vector<const Render*>& group) {
  const Render& first = *group.front();
  if (first.crop.size(0) == first.height && first.crop.size(1) == first.width) {
    for (const Render* r : group) write_slot(r->crop, *r);
    return;
  }
  const int64_t per_image = first.crop.size(0) * first.crop.size(1);
  const auto chunk = static_cast<size_t>(std::max<int64_t>(1, kMaxGpuRegionPixels / per_image));
  for (size_t at = 0; at < group.size(); at += chunk) {
    const size_t n = std::min(chunk, group.size() - at);
    std::vector<torch::Tensor> crops;
    for (size_t i = 0; i < n; ++i) crops.push_back(group[at + i]->crop);
    const auto x = (n == 1 ? crops.front().unsqueeze(0) : torch::stack(crops)).permute({0, 3, 1, 2}).to(torch::kFloat);
    const auto y = F::interpolate(x, resize_options(first.e->spec.interpolation, first.height, first.width))
                       .round_()
                       .clamp_(0, 255)
                       .permute({0, 2, 3, 1});
    for (size_t i = 0; i < n; ++i) write_slot(y[static_cast<int64_t>(i)], *group[at + i]);
  }
}

}  // namespace

void render_decoded_all(const std::vector<DecodedRegion>& regions, ImageBatch& batch) {
  std::vector<Render> renders;
  renders.reserve(regions.size());
  for (const DecodedRegion& d : regions)
    renders.push_back(plan_render(d, batch.encoded[d.slot], batch.images[static_cast<int64_t>(d.slot)]));
  // Grouped by size, in slot order within a group: the resize of each image is computed alone either way (each
  // output pixel from its own image), so grouping changes the launches, not the bytes.
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int>, std::vector<const Render*>> groups;
  for (const Render& r : renders)
    groups[{r.crop.size(0), r.crop.size(1), r.height, r.width, static_cast<int>(r.e->spec.interpolation)}].push_back(
        &r);
  for (const auto& entry : groups) render_group(entry.second);
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
