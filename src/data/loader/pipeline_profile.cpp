#include "trainer/data/loader/pipeline_profile.hpp"

#include <algorithm>

namespace trainer {

const char* sample_stage_name(size_t stage) {
  static constexpr const char* names[kSampleStages] = {"read", "plan", "decode", "resample", "augment"};
  return stage < kSampleStages ? names[stage] : "?";
}

void PipelineProfile::add_sample(const SampleTimes& t) {
  const std::array<double, kSampleStages> s = {t.read_s, t.plan_s, t.decode_s, t.render_s, t.augment_s};
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, added] = records_.try_emplace(std::this_thread::get_id());
  if (added) it->second.order = records_.size() - 1;
  Record& r = it->second;
  for (size_t k = 0; k < kSampleStages; ++k) r.ms[k].push_back(static_cast<float>(1000.0 * s[k]));
  r.pixels_decoded += t.pixels_decoded;
  r.pixels_full += t.pixels_full;
}

void PipelineProfile::add_batch_memory(double seconds, bool new_block) {
  std::lock_guard<std::mutex> lock(mutex_);
  batch_memory_s_.push_back(seconds);
  new_batch_blocks_ += new_block ? 1 : 0;
}

std::vector<WorkerProfile> PipelineProfile::workers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<WorkerProfile> out(records_.size());
  for (const auto& [id, r] : records_) {
    WorkerProfile& w = out[r.order];
    w.samples = r.ms[0].size();
    for (size_t k = 0; k < kSampleStages; ++k) {
      std::vector<float> v = r.ms[k];
      for (float x : v) w.total_s[k] += x / 1000.0;
      if (v.empty()) continue;
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
      w.median_ms[k] = v[v.size() / 2];
    }
    w.pixels_decoded = r.pixels_decoded;
    w.pixels_full = r.pixels_full;
  }
  return out;
}

std::vector<double> PipelineProfile::batch_memory_s() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return batch_memory_s_;
}

size_t PipelineProfile::new_batch_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return new_batch_blocks_;
}

}  // namespace trainer
