// nvJPEG's batched decode (CUDA builds that found nvjpeg.h): see batch_decoder.hpp.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <nvjpeg.h>

#include <algorithm>
#include <string>
#include <vector>

#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

const char* status_name(nvjpegStatus_t s) {
  switch (s) {
    case NVJPEG_STATUS_SUCCESS: return "success";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "not initialized";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "invalid parameter";
    case NVJPEG_STATUS_BAD_JPEG: return "bad JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "JPEG not supported";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "allocator failure";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "execution failed";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "no such decoder on this GPU";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "internal error";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "not implemented";
    default: return "error";
  }
}

void check(nvjpegStatus_t s, const char* call) {
  if (s != NVJPEG_STATUS_SUCCESS)
    throw TrainError(std::string("nvJPEG: ") + call + " failed: " + status_name(s) + " (" +
                     std::to_string(static_cast<int>(s)) + ")");
}

// The region nvJPEG decodes for a plan, in source pixels: a training crop's box widened to 16-pixel (MCU)
// boundaries (the decoder starts at whole blocks; render_decoded() cuts the exact box), or the whole image for
// an evaluation plan, which resizes all of it.
struct Region {
  int64_t left = 0, top = 0, width = 0, height = 0;
  bool operator==(const Region& o) const {
    return left == o.left && top == o.top && width == o.width && height == o.height;
  }
};

Region whole_image(const EncodedImage& e) { return {0, 0, e.info.width, e.info.height}; }

Region region_of(const EncodedImage& e) {
  if (e.plan.resized.width > 0) return whole_image(e);
  const auto left = static_cast<int64_t>(e.plan.box.left) / 16 * 16;
  const auto top = static_cast<int64_t>(e.plan.box.top) / 16 * 16;
  const int64_t right = std::min<int64_t>(e.info.width, static_cast<int64_t>(e.plan.box.left + e.plan.box.width));
  const int64_t bottom = std::min<int64_t>(e.info.height, static_cast<int64_t>(e.plan.box.top + e.plan.box.height));
  return {left, top, right - left, bottom - top};
}

// One image of a batched call: its slot and the region decoded.
struct Job {
  size_t slot;
  Region region;
};

class NvjpegDecoder final : public BatchDecoder {
 public:
  explicit NvjpegDecoder(const torch::Device& device)
      : device_(device.index() < 0 ? torch::Device(torch::kCUDA, 0) : device) {
    const c10::cuda::CUDAGuard guard(device_);
    // The JPEG engines first (A100, H100, H200: nvJPEG decodes the batch there, a crop's region only); GPUs
    // without them (consumer cards) say so with ARCH_MISMATCH and get the hybrid GPU decoder.
    hardware_ = nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &handle_) == NVJPEG_STATUS_SUCCESS;
    if (!hardware_) check(nvjpegCreateEx(NVJPEG_BACKEND_GPU_HYBRID, nullptr, nullptr, 0, &handle_), "nvjpegCreateEx");
    check(nvjpegJpegStateCreate(handle_, &state_), "nvjpegJpegStateCreate");
    check(nvjpegJpegStreamCreate(handle_, &stream_), "nvjpegJpegStreamCreate");
  }
  ~NvjpegDecoder() override {
    for (auto p : params_) nvjpegDecodeParamsDestroy(p);
    if (scratch_) nvjpegDecodeParamsDestroy(scratch_);
    if (stream_) nvjpegJpegStreamDestroy(stream_);
    if (state_) nvjpegJpegStateDestroy(state_);
    if (handle_) nvjpegDestroy(handle_);
  }
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  std::string describe() const override {
    return std::string("nvJPEG on ") + device_.str() +
           (hardware_ ? ", hardware backend (the GPU's JPEG engines, crop regions only)" : ", hybrid GPU backend");
  }

  void decode(ImageBatch& batch) override {
    const c10::cuda::CUDAGuard guard(device_);
    std::vector<Job> jobs;
    std::vector<size_t> cpu;  // deferred slots nvJPEG does not take (or failed on)
    for (size_t b = 0; b < batch.encoded.size(); ++b) {
      const EncodedImage& e = batch.encoded[b];
      if (!e.deferred()) continue;
      Region r = hardware_ && regions_ ? region_of(e) : whole_image(e);
      if (!accepts(e, r)) r = whole_image(e);
      if (accepts(e, r)) jobs.push_back({b, r});
      else cpu.push_back(b);
    }
    bool decoded = jobs.empty() || decode_on_gpu(batch, jobs);
    if (!decoded && hardware_ && regions_) {
      // The batch failed with regions: once more whole, and whole from now on if that works.
      for (Job& j : jobs) j.region = whole_image(batch.encoded[j.slot]);
      decoded = decode_on_gpu(batch, jobs);
      if (decoded) regions_ = false;
    }
    if (!decoded)
      for (const Job& j : jobs) cpu.push_back(j.slot);
    // The CPU path, one image at a time: rare, as the workers already left progressive, CMYK and unusual
    // samplings to the CPU; a damaged file fails there too and is named.
    finish_on_cpu(batch, cpu);
  }

 private:
  // Whether the batched decoder takes this file with this region (the hardware backend checks each stream).
  bool accepts(const EncodedImage& e, const Region& r) {
    if (!hardware_) return true;
    if (nvjpegJpegStreamParseHeader(handle_, e.bytes.data(), e.bytes.size(), stream_) != NVJPEG_STATUS_SUCCESS)
      return false;
    set_params(scratch_params(), r, e);
    int not_supported = 1;  // nvJPEG's convention: 0 means supported
    return nvjpegDecodeBatchedSupportedEx(handle_, stream_, scratch_params(), &not_supported) ==
               NVJPEG_STATUS_SUCCESS &&
           not_supported == 0;
  }

  nvjpegDecodeParams_t scratch_params() {
    if (!scratch_) check(nvjpegDecodeParamsCreate(handle_, &scratch_), "nvjpegDecodeParamsCreate");
    return scratch_;
  }

  static void set_params(nvjpegDecodeParams_t p, const Region& r, const EncodedImage& e) {
    check(nvjpegDecodeParamsSetOutputFormat(p, NVJPEG_OUTPUT_RGBI), "nvjpegDecodeParamsSetOutputFormat");
    const bool whole = r == whole_image(e);
    check(nvjpegDecodeParamsSetROI(p, static_cast<int>(r.left), static_cast<int>(r.top),
                                   whole ? -1 : static_cast<int>(r.width), whole ? -1 : static_cast<int>(r.height)),
          "nvjpegDecodeParamsSetROI");
  }

  // One batched call; false when nvJPEG fails on the batch (a damaged file among them, or a region it refuses).
  bool decode_on_gpu(ImageBatch& batch, const std::vector<Job>& jobs) {
    const size_t n = jobs.size();
    int64_t total = 0;
    for (const Job& j : jobs) total += j.region.width * j.region.height * 3;
    // From the caching allocator: the same sizes batch after batch reuse the same blocks, nothing grows.
    auto pixels = torch::empty({total}, torch::TensorOptions().dtype(torch::kUInt8).device(device_));
    std::vector<const unsigned char*> data(n);
    std::vector<size_t> lengths(n);
    std::vector<nvjpegImage_t> out(n);
    while (params_.size() < n) {
      nvjpegDecodeParams_t p = nullptr;
      check(nvjpegDecodeParamsCreate(handle_, &p), "nvjpegDecodeParamsCreate");
      params_.push_back(p);
    }
    int64_t offset = 0;
    for (size_t i = 0; i < n; ++i) {
      const EncodedImage& e = batch.encoded[jobs[i].slot];
      const Region& r = jobs[i].region;
      data[i] = e.bytes.data();
      lengths[i] = e.bytes.size();
      out[i] = nvjpegImage_t{};
      out[i].channel[0] = pixels.data_ptr<uint8_t>() + offset;
      out[i].pitch[0] = static_cast<size_t>(r.width * 3);
      offset += r.width * r.height * 3;
      if (hardware_) set_params(params_[i], r, e);
    }
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device_.index()).stream();
    if (static_cast<int>(n) != initialized_for_) {
      check(nvjpegDecodeBatchedInitialize(handle_, state_, static_cast<int>(n), 1, NVJPEG_OUTPUT_RGBI),
            "nvjpegDecodeBatchedInitialize");
      initialized_for_ = static_cast<int>(n);
    }
    const nvjpegStatus_t s =
        hardware_
            ? nvjpegDecodeBatchedEx(handle_, state_, data.data(), lengths.data(), out.data(), params_.data(), stream)
            : nvjpegDecodeBatched(handle_, state_, data.data(), lengths.data(), out.data(), stream);
    if (s != NVJPEG_STATUS_SUCCESS) {
      initialized_for_ = -1;  // a failed batch resets the state before the next one
      return false;
    }
    offset = 0;
    for (const Job& j : jobs) {
      const Region& r = j.region;
      const auto region = pixels.narrow(0, offset, r.width * r.height * 3).view({r.height, r.width, 3});
      offset += r.width * r.height * 3;
      render_decoded(region, r.top, r.left, batch.encoded[j.slot], batch.images[static_cast<int64_t>(j.slot)]);
    }
    return true;
  }

  torch::Device device_;
  bool hardware_ = false;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  nvjpegJpegStream_t stream_ = nullptr;
  std::vector<nvjpegDecodeParams_t> params_;  // one per image of the largest batch so far
  nvjpegDecodeParams_t scratch_ = nullptr;    // for the support checks
  bool regions_ = true;                       // decode crop regions (until the hardware refuses a batch of them)
  int initialized_for_ = -1;                  // the batch size nvjpegDecodeBatchedInitialize was last called with
};

}  // namespace

bool nvjpeg_built() { return true; }

std::unique_ptr<BatchDecoder> make_nvjpeg_decoder(const torch::Device& device) {
  return std::make_unique<NvjpegDecoder>(device);
}

}  // namespace trainer
