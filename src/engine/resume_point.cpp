#include "trainer/engine/resume_point.hpp"

#include <algorithm>

#include "trainer/engine/checkpoint_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/io/checkpoint_names.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

struct Candidate {
  fs::path path;
  int64_t step = 0;
  bool last = false;  // last.pt: first among files of one step (the others are its hard links)
};

// The run folder's checkpoints (last.pt, step-N.pt, epoch-E.pt), each with its step read from its metadata
// alone; a file whose metadata does not show its step is opened (alone, then let go) to learn it, and passed over
// when it does not open.
std::vector<Candidate> list_candidates(const fs::path& run_dir, ResumePoint& point) {
  std::vector<Candidate> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir, ec)) {
    const auto name = CheckpointNames::parse(entry.path().filename().string());
    if (!entry.is_regular_file() || !name || name->kind == CheckpointName::Kind::best) continue;
    std::optional<int64_t> step = peek_checkpoint_step(entry.path());
    if (!step) {
      try {
        step = LoadedCheckpoint(entry.path()).meta().step;
      } catch (const Error& e) {
        point.notes.push_back("resume auto: passing over " + entry.path().string() + ": " + e.message());
        continue;
      }
    }
    out.push_back({entry.path(), *step, name->kind == CheckpointName::Kind::last});
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return a.step != b.step ? a.step > b.step : a.last > b.last;
  });
  return out;
}

}  // namespace

ResumePoint find_resume_point(const fs::path& run_dir) {
  ResumePoint point;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) {
    point.notes.push_back("resume auto: no run folder " + run_dir.string() + " yet; starting a new run there");
    return point;
  }
  // Newest first, one file in memory at a time, stopping at the first that passes: a folder of large
  // checkpoints costs one of them, not all.
  for (const Candidate& candidate : list_candidates(run_dir, point)) {
    try {
      const LoadedCheckpoint checkpoint(candidate.path);  // its bytes checked
      // The weights restored into the model its config builds: they fit.
      const Config config = config_for_checkpoint(checkpoint, "", {}).config;
      model_from_checkpoint(checkpoint, config.model, checkpoint.meta().input, /*ema=*/false);
      point.checkpoint = candidate.path;
      point.notes.push_back("resume auto: continuing from " + candidate.path.string() + " (step " +
                            std::to_string(checkpoint.meta().step) +
                            ", the newest checkpoint that loads and passes its checksums)");
      return point;
    } catch (const Error& e) {
      point.notes.push_back("resume auto: passing over " + candidate.path.string() + ": " + e.message());
    }
  }
  point.notes.push_back("resume auto: no usable checkpoint in " + run_dir.string() + "; starting a new run there");
  return point;
}

}  // namespace trainer
