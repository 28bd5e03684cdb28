// Where the loader's time goes, for `trainer bench data`: every sample's stage times (sample_pixels.hpp's
// SampleTimes) collected per worker thread, and the time taken to get each batch's memory. Workers add to it
// concurrently; the summary is read once they are done.
//   auto profile = std::make_shared<PipelineProfile>();   // given to the loader (TrainLoaderOptions::profile)
//   for (const WorkerProfile& w : profile->workers()) ... w.median_ms[kDecodeStage] ...
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainer/data/pixels/sample_pixels.hpp"

namespace trainer {

enum SampleStage : size_t { kReadStage, kPlanStage, kDecodeStage, kRenderStage, kAugmentStage, kSampleStages };

// The stages' names as `trainer bench data` prints them: read, plan, decode, resample, augment.
const char* sample_stage_name(size_t stage);

struct WorkerProfile {
  size_t samples = 0;
  std::array<double, kSampleStages> median_ms{};  // per sample
  std::array<double, kSampleStages> total_s{};
  int64_t pixels_decoded = 0, pixels_full = 0;  // decoded (at the decode's scale) against the files' full size
};

class PipelineProfile {
 public:
  void add_sample(const SampleTimes& t);  // from the worker that read it
  // Getting one batch's memory: `seconds`, and whether it took a new block or wrote a recycled one again.
  void add_batch_memory(double seconds, bool new_block);
  std::vector<WorkerProfile> workers() const;  // in the order the threads first reported
  std::vector<double> batch_memory_s() const;
  size_t new_batch_blocks() const;  // of batch_memory_s().size() batches

 private:
  struct Record {
    size_t order = 0;
    std::array<std::vector<float>, kSampleStages> ms;
    int64_t pixels_decoded = 0, pixels_full = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::thread::id, Record> records_;
  std::vector<double> batch_memory_s_;
  size_t new_batch_blocks_ = 0;
};

}  // namespace trainer
