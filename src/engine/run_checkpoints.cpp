#include "trainer/engine/run_checkpoints.hpp"

#include <algorithm>

#include "trainer/config/load.hpp"
#include "trainer/distributed/rank_generators.hpp"
#include "trainer/io/checkpoint_names.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/write_error.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// step-N.pt beyond the newest `keep` are removed, oldest first. Only step checkpoints' names are touched, and
// only after the newest one was written, so the newest good checkpoint always survives.
void prune_step_checkpoints(const fs::path& dir, int64_t keep) {
  std::vector<std::pair<int64_t, fs::path>> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto name = CheckpointNames::parse(entry.path().filename().string());
    if (name && name->kind == CheckpointName::Kind::step) found.emplace_back(name->number, entry.path());
  }
  std::sort(found.begin(), found.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < found.size(); ++i) fs::remove(found[i].second);
}

}  // namespace

RunCheckpoints::RunCheckpoints(const Session& s)
    : dir_(s.run_dir),
      last_(s.run_dir.empty() ? fs::path() : s.run_dir / CheckpointNames::last()),
      resolved_config_(config_to_json(s.config)),
      keep_last_(s.config.train.keep_last),
      distributed_(s.group != nullptr) {}

double RunCheckpoints::minutes_since_write() const { return seconds_since(last_write_) / 60.0; }

std::string RunCheckpoints::last_good() const {
  if (dir_.empty()) return std::string();  // a rank other than 0: rank 0's error says
  return fs::exists(last_)
             ? "; the last good checkpoint is " + last_.string() + " (trainer --resume " + last_.string() + ")"
             : std::string("; no checkpoint was written yet");
}

void RunCheckpoints::save(const Session& s, const std::vector<fs::path>& also) {
  const GeneratorRows ranks = s.group ? gather_rank_generators(*s.group) : GeneratorRows();
  write(s, also, ranks);
}

void RunCheckpoints::save_after_failure(const Session& s) { write(s, {}, {}); }

void RunCheckpoints::write(const Session& s, const std::vector<fs::path>& also, const GeneratorRows& ranks) {
  last_write_ = Clock::now();  // on every rank, writer or not: the ranks' timed-save votes stay in step
  if (dir_.empty()) return;
  CheckpointMeta meta;
  static_cast<TrainState&>(meta) = s.state;
  meta.config = resolved_config_;
  meta.class_names = s.train_data->class_names();
  meta.train_images = static_cast<int64_t>(s.train_data->size());
  meta.input = s.train_data->shape();
  meta.scaler = s.scaler.enabled() ? s.scaler.state() : nlohmann::json();
  meta.ema_updates = s.ema ? s.ema->updates() : 0;
  // Said once, before the write that may fail: the run goes on until a write really does.
  std::error_code ec;
  const auto free = free_bytes(dir_);
  if (const auto size = fs::file_size(last_, ec); !ec && free && *free < size && !warned_low_space_) {
    warned_low_space_ = true;
    s.logs.main->warn("{} free in {}, less than the last checkpoint ({}): the next save may fail", byte_size(*free),
                      dir_.string(), byte_size(size));
  }
  try {
    save_checkpoint(last_, meta, {*s.model, *s.optimizer, s.ema ? &s.ema->model() : nullptr}, ranks);
  } catch (const TrainError& e) {
    throw TrainError(e.message() + " (after step " + std::to_string(s.state.step) + ")" + last_good());
  }
  // Second names of last.pt (hard links, or copies where the file system has none). last.pt is always rewritten
  // as a new file, so step-N.pt, epoch-E.pt and best.pt keep their contents when it changes.
  for (const auto& path : also) link_file_atomically(last_, path);
}

void RunCheckpoints::save_step(const Session& s) {
  save(s, {step(s.state.step)});
  if (!dir_.empty()) prune_step_checkpoints(dir_, keep_last_);
}

}  // namespace trainer
