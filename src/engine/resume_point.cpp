#include "trainer/engine/resume_point.hpp"

#include <algorithm>

#include "trainer/engine/checkpoint_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

bool is_checkpoint_name(const std::string& name) {
  const auto numbered = [&](const std::string& prefix) {
    return name.rfind(prefix, 0) == 0 && name.size() > prefix.size() + 3 &&
           name.compare(name.size() - 3, 3, ".pt") == 0 &&
           std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end() - 3, ::isdigit);
  };
  return name == "last.pt" || numbered("step-") || numbered("epoch-");
}

}  // namespace

ResumePoint find_resume_point(const fs::path& run_dir) {
  ResumePoint point;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) {
    point.notes.push_back("resume auto: no run folder " + run_dir.string() + " yet; starting a new run there");
    return point;
  }
  // Each readable candidate, opened once (its bytes checked); files that do not open are passed over now.
  std::vector<LoadedCheckpoint> candidates;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    if (!entry.is_regular_file() || !is_checkpoint_name(entry.path().filename().string())) continue;
    try {
      candidates.emplace_back(entry.path());
    } catch (const Error& e) {
      point.notes.push_back("resume auto: passing over " + entry.path().string() + ": " + e.message());
    }
  }
  // Newest step first; at equal steps last.pt (the others are its hard links).
  std::sort(candidates.begin(), candidates.end(), [](const LoadedCheckpoint& a, const LoadedCheckpoint& b) {
    if (a.meta().step != b.meta().step) return a.meta().step > b.meta().step;
    return (a.path().filename() == "last.pt") > (b.path().filename() == "last.pt");
  });
  for (const LoadedCheckpoint& checkpoint : candidates) {
    const fs::path& path = checkpoint.path();
    try {
      // The weights restored into the model its config builds: they fit.
      const Config config = config_for_checkpoint(checkpoint, "", {}).config;
      model_from_checkpoint(checkpoint, config.model, checkpoint.meta().input, /*ema=*/false);
      point.checkpoint = path;
      point.notes.push_back("resume auto: continuing from " + path.string() + " (step " +
                            std::to_string(checkpoint.meta().step) +
                            ", the newest checkpoint that loads and passes its checksums)");
      return point;
    } catch (const Error& e) {
      point.notes.push_back("resume auto: passing over " + path.string() + ": " + e.message());
    }
  }
  point.notes.push_back("resume auto: no usable checkpoint in " + run_dir.string() + "; starting a new run there");
  return point;
}

}  // namespace trainer
