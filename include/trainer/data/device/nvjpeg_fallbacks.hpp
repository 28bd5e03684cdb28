// What the nvJPEG decoder (nvjpeg_decoder.cpp) does when nvJPEG refuses something, kept apart from nvJPEG so that
// the CPU tests run every branch with steps that fail on demand (a refused flag, a region-only failure, a damaged
// file cannot be made to happen on a GPU at will):
//   - opening a backend: with BITSTREAM_STRICT, then without it when that is refused for any reason but "no JPEG
//     engines", then the decoder's state; every failure named for the log and the run's decode line;
//   - a batched call that fails: crop regions retried whole, then halves, down to the file that fails.
//   BackendOpening o = open_backend(steps, "the hardware backend");   // steps: the nvJPEG calls
//   BatchRetry retry;  std::vector<size_t> cpu = retry.run(slots, planned_regions, call);
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace trainer {

// One nvJPEG call's outcome: its status as text ("internal error (6)") when it failed.
struct NvjpegStep {
  bool ok = true;
  bool no_engines = false;  // NVJPEG_STATUS_ARCH_MISMATCH from nvjpegCreateEx: a GPU without JPEG engines
  std::string status;
};

// The calls that open one of nvJPEG's backends. create(strict): nvjpegCreateEx with BITSTREAM_STRICT or without it
// (a handle on success); create_state(): nvjpegJpegStateCreate on that handle; destroy(): the handle released when
// create_state failed. strict_flag: whether this nvjpeg.h has BITSTREAM_STRICT at all.
struct BackendSteps {
  std::function<NvjpegStep(bool strict)> create;
  std::function<NvjpegStep()> create_state;
  std::function<void()> destroy;
  bool strict_flag = true;
};

// How it went. opened: a handle and a state (else none is left). strict: opened with BITSTREAM_STRICT. note: what
// the run's decode line and log say about it: why the backend is not used, or that it is used without the strict
// flag; empty when opened as asked. warn: whether the log should hear of it (not for a GPU without JPEG engines,
// which is no fault, nor for a strict flag this nvjpeg.h lacks).
struct BackendOpening {
  bool opened = false;
  bool strict = false;
  bool no_engines = false;
  std::string note;
  bool warn = false;
};
// `backend` names it in the note: "the hardware backend".
BackendOpening open_backend(const BackendSteps& steps, const std::string& backend);

// One decode()'s batch through nvJPEG, failing calls retried:
//   1. the batch as planned (each image's crop region where planned, else the whole image);
//   2. failed with crop regions: again with whole images. Decoded so, the regions were what failed, not a file, and
//      after kRegionRefusalsTolerated such batches regions() turns false for the rest of the run;
//   3. failed with whole images: the halves on their own, each split again while it fails, so that a damaged file
//      goes to the CPU alone rather than with its batch (about 2 log2(batch) calls for one such file).
// At most kCallsPerBatch calls a batch: what is left when they run out goes to the CPU.
class BatchRetry {
 public:
  static constexpr int kCallsPerBatch = 64;
  static constexpr int kRegionRefusalsTolerated = 3;
  // One batched call on `slots` (whole images when `whole`, else as planned); false when nvJPEG failed on it.
  using Call = std::function<bool(const std::vector<size_t>& slots, bool whole)>;
  // Returns the slots no call decoded, in batch order: the CPU decodes them. `planned_regions`: whether any slot was
  // planned with its crop region (else step 2 is skipped).
  std::vector<size_t> run(const std::vector<size_t>& slots, bool planned_regions, const Call& call);
  // Whether crop regions are still planned.
  bool regions() const { return refusals_ < kRegionRefusalsTolerated; }
  int region_refusals() const { return refusals_; }

 private:
  void split(std::vector<size_t> slots, const Call& call, std::vector<size_t>& cpu);
  bool try_call(const std::vector<size_t>& slots, bool whole, const Call& call);
  int refusals_ = 0;
  int calls_left_ = 0;
};

}  // namespace trainer
