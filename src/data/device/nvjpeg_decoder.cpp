// nvJPEG's batched decode (CUDA builds that found nvjpeg.h): see batch_decoder.hpp.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <nvjpeg.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "trainer/data/device/batch_decoder.hpp"
#include "trainer/data/device/nvjpeg_fallbacks.hpp"
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

std::string status_text(nvjpegStatus_t s) {
  return std::string(status_name(s)) + " (" + std::to_string(static_cast<int>(s)) + ")";
}

void check(nvjpegStatus_t s, const char* call) {
  if (s != NVJPEG_STATUS_SUCCESS) throw TrainError(std::string("nvJPEG: ") + call + " failed: " + status_text(s));
}

// The region nvJPEG decodes for a plan, in source pixels: a training crop's box widened to 16-pixel (MCU)
// boundaries (the decoder starts at whole blocks; render_decoded_all() cuts the exact box), or the whole image for
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

int64_t area(const Region& r) { return r.width * r.height; }

class NvjpegDecoder final : public BatchDecoder {
 public:
  NvjpegDecoder(const torch::Device& device, std::shared_ptr<spdlog::logger> log, NvjpegBackend backend)
      : device_(device.index() < 0 ? torch::Device(torch::kCUDA, 0) : device), log_(std::move(log)) {
    const c10::cuda::CUDAGuard guard(device_);
    // The JPEG engines first (A100, H100, H200: nvJPEG decodes the batch there, a crop's region only); GPUs
    // without them (consumer cards) say so with ARCH_MISMATCH and get the hybrid GPU decoder.
    if (backend == NvjpegBackend::automatic) {
      const BackendOpening hardware = open_backend(steps(NVJPEG_BACKEND_HARDWARE), "the hardware backend");
      hardware_ = hardware.opened;
      note_ = hardware.note;
      // Two calls, not one with a chosen format: fmt checks a format string when it is compiled (C++20).
      if (log_ && hardware.warn && hardware.opened)
        log_->warn("decode: nvJPEG's hardware backend runs {}", hardware.note);
      else if (log_ && hardware.warn)
        log_->warn("decode: nvJPEG's hardware backend could not be used ({}); decoding on the hybrid GPU backend",
                   hardware.note);
    }
    if (!hardware_) {
      const BackendOpening hybrid = open_backend(steps(NVJPEG_BACKEND_GPU_HYBRID), "the hybrid backend");
      if (!hybrid.opened)
        throw TrainError("nvJPEG on " + device_.str() + ": " + hybrid.note + (note_.empty() ? "" : "; " + note_));
      if (log_ && hybrid.warn) log_->warn("decode: nvJPEG's hybrid backend runs {}", hybrid.note);
      if (!hybrid.note.empty())
        note_ += (note_.empty() ? "the hybrid backend runs " : "; the hybrid backend runs ") + hybrid.note;
    }
  }
  ~NvjpegDecoder() override {
    // A batch the decode stage dropped may still be decoding, or rendering from our buffers: it ends first.
    if (last_stream_) (void)cudaStreamSynchronize(last_stream_);
    for (auto p : params_) nvjpegDecodeParamsDestroy(p);
    for (const Checker& c : checkers_) {
      nvjpegDecodeParamsDestroy(c.params);
      nvjpegJpegStreamDestroy(c.stream);
    }
    if (state_) nvjpegJpegStateDestroy(state_);
    if (handle_) nvjpegDestroy(handle_);
  }
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  std::string describe() const override {
    return std::string("nvJPEG on ") + device_.str() +
           (hardware_ ? ", hardware backend (the GPU's JPEG engines, crop regions only)" : ", hybrid GPU backend") +
           (note_.empty() ? "" : " (" + note_ + ")");
  }

  // In a loader worker: the header parsed and the support check made with a stream of the worker's own (a
  // checker from the pool), for the crop's region, else the whole image. Regions over kMaxGpuRegionPixels are
  // refused. The hybrid backend decodes whole images and takes every file the workers defer.
  bool takes(EncodedImage& e) const override {
    const Region crop = region_of(e), whole = whole_image(e);
    bool ok = false;
    if (!hardware_) {
      ok = area(whole) <= kMaxGpuRegionPixels;
      e.crop_region = false;
    } else {
      Checker c = borrow_checker();
      if (nvjpegJpegStreamParseHeader(handle_, e.bytes.data(), e.bytes.size(), c.stream) == NVJPEG_STATUS_SUCCESS) {
        e.crop_region = true;
        ok = area(crop) <= kMaxGpuRegionPixels && supported(c, crop, e);
        if (!ok && !(crop == whole)) {
          e.crop_region = false;
          ok = area(whole) <= kMaxGpuRegionPixels && supported(c, whole, e);
        }
      }
      return_checker(c);
    }
    if (!ok) ++refused_;
    return ok;
  }

  void decode(ImageBatch& batch, const BadSlots& bad) override {
    const c10::cuda::CUDAGuard guard(device_);
    last_stream_ = at::cuda::getCurrentCUDAStream(device_.index()).stream();
    const bool regions = hardware_ && retry_.regions();
    std::vector<size_t> slots;
    bool planned_regions = false;
    for (size_t b = 0; b < batch.encoded.size(); ++b) {
      const EncodedImage& e = batch.encoded[b];
      if (!e.deferred()) continue;
      slots.push_back(b);
      planned_regions = planned_regions || (regions && e.crop_region && !(region_of(e) == whole_image(e)));
    }
    // What the GPU leaves to the CPU path, one image at a time: a damaged file fails there too and is named. Images
    // a call left unwritten join those no call decoded.
    std::vector<size_t> blank;
    std::vector<size_t> cpu = retry_.run(slots, planned_regions, [&](const std::vector<size_t>& these, bool whole) {
      std::vector<Job> jobs;
      for (const size_t b : these) {
        const EncodedImage& e = batch.encoded[b];
        jobs.push_back({b, regions && !whole && e.crop_region ? region_of(e) : whole_image(e)});
      }
      return decode_on_gpu(batch, jobs, blank);
    });
    if (regions && !retry_.regions() && log_)
      log_->warn(
          "decode: nvJPEG failed {} batches with crop regions that it decoded whole; decoding whole images "
          "from now on",
          retry_.region_refusals());
    cpu.insert(cpu.end(), blank.begin(), blank.end());
    const auto failed = static_cast<int64_t>(finish_on_cpu(batch, cpu, bad));
    cpu_ += static_cast<int64_t>(cpu.size()) - failed;
    failed_ += failed;
  }

 private:
  // A jpeg stream and decode parameters for one worker's support checks (nvJPEG: a stream per thread).
  struct Checker {
    nvjpegJpegStream_t stream = nullptr;
    nvjpegDecodeParams_t params = nullptr;
  };

  Checker borrow_checker() const {
    {
      const std::lock_guard<std::mutex> lock(checkers_mutex_);
      if (!idle_checkers_.empty()) {
        Checker c = idle_checkers_.back();
        idle_checkers_.pop_back();
        return c;
      }
    }
    Checker c;
    check(nvjpegJpegStreamCreate(handle_, &c.stream), "nvjpegJpegStreamCreate");
    check(nvjpegDecodeParamsCreate(handle_, &c.params), "nvjpegDecodeParamsCreate");
    const std::lock_guard<std::mutex> lock(checkers_mutex_);
    checkers_.push_back(c);
    return c;
  }
  void return_checker(const Checker& c) const {
    const std::lock_guard<std::mutex> lock(checkers_mutex_);
    idle_checkers_.push_back(c);
  }

  bool supported(const Checker& c, const Region& r, const EncodedImage& e) const {
    set_params(c.params, r, e);
    int not_supported = 1;  // nvJPEG's convention: 0 means supported
    return nvjpegDecodeBatchedSupportedEx(handle_, c.stream, c.params, &not_supported) == NVJPEG_STATUS_SUCCESS &&
           not_supported == 0;
  }

  static void set_params(nvjpegDecodeParams_t p, const Region& r, const EncodedImage& e) {
    check(nvjpegDecodeParamsSetOutputFormat(p, NVJPEG_OUTPUT_RGBI), "nvjpegDecodeParamsSetOutputFormat");
    const bool whole = r == whole_image(e);
    check(nvjpegDecodeParamsSetROI(p, static_cast<int>(r.left), static_cast<int>(r.top),
                                   whole ? -1 : static_cast<int>(r.width), whole ? -1 : static_cast<int>(r.height)),
          "nvjpegDecodeParamsSetROI");
  }

  // The nvJPEG calls that open `backend` (open_backend() decides their order), on handle_ and state_.
  BackendSteps steps(nvjpegBackend_t backend) {
    BackendSteps s;
    // Damaged scan data is an error, not an image "decoded" from what the engine made of it.
#ifdef NVJPEG_FLAGS_BITSTREAM_STRICT
    s.strict_flag = true;
#else
    s.strict_flag = false;
#endif
    const auto step = [backend](nvjpegStatus_t status) {
      return NvjpegStep{status == NVJPEG_STATUS_SUCCESS,
                        backend == NVJPEG_BACKEND_HARDWARE && status == NVJPEG_STATUS_ARCH_MISMATCH,
                        status_text(status)};
    };
    s.create = [this, backend, step](bool strict) {
      unsigned int flags = 0;
#ifdef NVJPEG_FLAGS_BITSTREAM_STRICT
      if (strict) flags |= NVJPEG_FLAGS_BITSTREAM_STRICT;
#endif
      const nvjpegStatus_t status = nvjpegCreateEx(backend, nullptr, nullptr, flags, &handle_);
      if (status != NVJPEG_STATUS_SUCCESS) handle_ = nullptr;
      return step(status);
    };
    s.create_state = [this, step] {
      const nvjpegStatus_t status = nvjpegJpegStateCreate(handle_, &state_);
      if (status != NVJPEG_STATUS_SUCCESS) state_ = nullptr;
      return step(status);
    };
    s.destroy = [this] {
      nvjpegDestroy(handle_);
      handle_ = nullptr;
    };
    return s;
  }

  // One batched call, the check for images left unwritten (decoded by the CPU instead: their slots join `cpu`),
  // then the renders; false when nvJPEG fails on the batch (a damaged file among them, or a region it refuses),
  // with nothing of it left running.
  bool decode_on_gpu(ImageBatch& batch, const std::vector<Job>& jobs, std::vector<size_t>& cpu) {
    const size_t n = jobs.size();
    int64_t total = 0, widest = 0, tallest = 0;
    for (const Job& j : jobs) {
      total += area(j.region) * 3;
      widest = std::max(widest, j.region.width);
      tallest = std::max(tallest, j.region.height);
    }
    // Zeroed: a pixel the decoder leaves unwritten is black, never another image's.
    auto pixels = torch::zeros({total}, torch::TensorOptions().dtype(torch::kUInt8).device(device_));
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
      offset += area(r) * 3;
      if (hardware_) set_params(params_[i], r, e);
    }
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device_.index()).stream();
    // The host waits for everything queued on this stream: the last batch's nvJPEG work and the renders that read
    // its output, and the zero fill above. nvJPEG requires a finished batch before it is initialised again, and
    // the hardware engine writes its destination when called, not in stream order: without this wait it could
    // overwrite memory (the caching allocator's block of the last batch's output) that queued kernels still read.
    sync(stream);
    kept_.clear();
    if (static_cast<int>(n) != initialized_for_) {
      check(nvjpegDecodeBatchedInitialize(handle_, state_, static_cast<int>(n), 1, NVJPEG_OUTPUT_RGBI),
            "nvjpegDecodeBatchedInitialize");
      initialized_for_ = static_cast<int>(n);
      // The hardware backend's buffers for the batch at its largest, so that it does not grow them with
      // synchronising cudaMalloc calls batch after batch (a hint: a no-op on other backends, and a failure only
      // means they grow as before). 4:4:4 covers every chroma sampling.
      if (hardware_ &&
          (static_cast<int>(n) > allocated_.batch || widest > allocated_.width || tallest > allocated_.height)) {
        allocated_ = {std::max(allocated_.batch, static_cast<int>(n)), std::max(allocated_.width, widest),
                      std::max(allocated_.height, tallest)};
        (void)nvjpegDecodeBatchedPreAllocate(handle_, state_, allocated_.batch, static_cast<int>(allocated_.width),
                                             static_cast<int>(allocated_.height), NVJPEG_CSS_444, NVJPEG_OUTPUT_RGBI);
      }
    }
    const nvjpegStatus_t s =
        hardware_
            ? nvjpegDecodeBatchedEx(handle_, state_, data.data(), lengths.data(), out.data(), params_.data(), stream)
            : nvjpegDecodeBatched(handle_, state_, data.data(), lengths.data(), out.data(), stream);
    if (s != NVJPEG_STATUS_SUCCESS) {
      // The failed batch may still run on the engines: it ends before the state or the bitstreams are used again.
      sync(stream);
      initialized_for_ = -1;  // a failed batch resets the state before the next one
      ++failed_calls_;
      if (log_ && !failure_logged_) {
        failure_logged_ = true;
        log_->warn(
            "decode: nvJPEG failed on a batch of {} images ({}); such batches are split until what fails is "
            "alone, which the CPU decodes (counted as decode_failed_calls per epoch; a damaged file is named)",
            n, status_name(s));
      }
      return false;
    }
    std::vector<int64_t> offsets, sizes;
    offset = 0;
    for (const Job& j : jobs) {
      offsets.push_back(offset);
      sizes.push_back(area(j.region) * 3);
      offset += sizes.back();
    }
    // The host waits here for the decode (this stage's thread, not the training thread's), and an image left at
    // the zero fill trains as what the CPU decodes, not as a black image with a real label.
    const std::vector<size_t> blank = blank_regions(pixels, offsets, sizes);
    std::vector<DecodedRegion> regions;
    for (size_t i = 0, b = 0; i < n; ++i) {
      const Region& r = jobs[i].region;
      if (b < blank.size() && blank[b] == i) {
        ++b;
        cpu.push_back(jobs[i].slot);
        continue;
      }
      regions.push_back(
          {pixels.narrow(0, offsets[i], sizes[i]).view({r.height, r.width, 3}), r.top, r.left, jobs[i].slot});
      // The bitstream stays alive until the next batched call has waited for this one.
      kept_.push_back(std::move(batch.encoded[jobs[i].slot].bytes));
    }
    render_decoded_all(regions, batch);
    gpu_ += static_cast<int64_t>(regions.size());
    blank_ += static_cast<int64_t>(blank.size());
    if (!blank.empty() && log_ && !blank_logged_) {
      blank_logged_ = true;
      log_->warn(
          "decode: nvJPEG reported {} of a batch of {} images decoded but left them unwritten; those are "
          "decoded by the CPU, counted as decode_blank",
          blank.size(), n);
    }
    return true;
  }

  static void sync(cudaStream_t stream) {
    const cudaError_t e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) throw TrainError(std::string("CUDA: decode stream: ") + cudaGetErrorString(e));
  }

  struct Allocated {
    int batch = 0;
    int64_t width = 0, height = 0;
  };

  torch::Device device_;
  std::shared_ptr<spdlog::logger> log_;
  bool hardware_ = false;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  std::vector<nvjpegDecodeParams_t> params_;  // one per image of the largest batch so far
  mutable std::mutex checkers_mutex_;         // the workers' checkers: all made so far, and those not in use
  mutable std::vector<Checker> checkers_, idle_checkers_;
  std::vector<std::vector<uint8_t>> kept_;  // the last batch's bitstreams, until the next call has waited for it
  BatchRetry retry_;                        // how failed batched calls are retried; whether crop regions still are
  int initialized_for_ = -1;                // the batch size nvjpegDecodeBatchedInitialize was last called with
  Allocated allocated_;                     // what nvjpegDecodeBatchedPreAllocate was last asked for
  bool failure_logged_ = false;
  bool blank_logged_ = false;
  std::string note_;  // why the hardware backend is not used, or a backend is used without the strict flag
  cudaStream_t last_stream_ = nullptr;  // the stream decode() last queued work on
};

}  // namespace

bool nvjpeg_built() { return true; }

std::unique_ptr<BatchDecoder> make_nvjpeg_decoder(const torch::Device& device, std::shared_ptr<spdlog::logger> log,
                                                  NvjpegBackend backend) {
  return std::make_unique<NvjpegDecoder>(device, std::move(log), backend);
}

}  // namespace trainer
