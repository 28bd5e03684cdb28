#include "trainer/data/device/nvjpeg_fallbacks.hpp"

#include <algorithm>

namespace trainer {

BackendOpening open_backend(const BackendSteps& steps, const std::string& backend) {
  BackendOpening o;
  NvjpegStep created = steps.create(steps.strict_flag);
  o.strict = steps.strict_flag;
  if (!created.ok && !created.no_engines && steps.strict_flag) {
    // An nvJPEG or driver that refuses the flag for this backend: the backend without it (damaged scan data is
    // then caught only where the decoder itself reports it), said in the log and the decode line.
    const NvjpegStep plain = steps.create(false);
    if (plain.ok) {
      o.strict = false;
      o.note = "without BITSTREAM_STRICT, which nvjpegCreateEx refused: " + created.status;
      o.warn = true;
      created = plain;
    } else if (plain.no_engines) {
      created = plain;
    } else {
      created.status += "; without BITSTREAM_STRICT: " + plain.status;
    }
  }
  if (!created.ok) {
    BackendOpening failed;
    failed.no_engines = created.no_engines;
    failed.note =
        created.no_engines ? "this GPU has no JPEG engines" : backend + " failed at nvjpegCreateEx: " + created.status;
    failed.warn = !created.no_engines;
    return failed;
  }
  if (const NvjpegStep state = steps.create_state(); !state.ok) {
    steps.destroy();
    BackendOpening failed;
    failed.note = backend + " failed at nvjpegJpegStateCreate: " + state.status;
    failed.warn = true;
    return failed;
  }
  o.opened = true;
  return o;
}

std::vector<size_t> BatchRetry::run(const std::vector<size_t>& slots, bool planned_regions, const Call& call) {
  std::vector<size_t> cpu;
  calls_left_ = kCallsPerBatch;
  if (slots.empty() || try_call(slots, false, call)) return cpu;
  if (planned_regions && try_call(slots, true, call)) {
    ++refusals_;  // the regions failed, not a file
    return cpu;
  }
  // A damaged file among them, most likely.
  split(slots, call, cpu);
  std::sort(cpu.begin(), cpu.end());
  return cpu;
}

bool BatchRetry::try_call(const std::vector<size_t>& slots, bool whole, const Call& call) {
  if (calls_left_ <= 0) return false;
  --calls_left_;
  return call(slots, whole);
}

void BatchRetry::split(std::vector<size_t> slots, const Call& call, std::vector<size_t>& cpu) {
  if (slots.size() < 2 || calls_left_ <= 0) {
    cpu.insert(cpu.end(), slots.begin(), slots.end());
    return;
  }
  const auto middle = slots.begin() + static_cast<std::ptrdiff_t>(slots.size() / 2);
  for (std::vector<size_t> half :
       {std::vector<size_t>(slots.begin(), middle), std::vector<size_t>(middle, slots.end())})
    if (!try_call(half, true, call)) split(std::move(half), call, cpu);
}

}  // namespace trainer
