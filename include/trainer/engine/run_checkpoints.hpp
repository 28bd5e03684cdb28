// The checkpoints of one run folder. last.pt is rewritten at every save; the other names are hard links to the
// file last.pt was at that moment: best.pt, epoch-E.pt (train.keep_every_epochs) and step-N.pt (the newest
// train.keep_last of them). A session without a run folder (a benchmark) saves nothing. In a data-parallel run
// every rank calls save() at the same step (it gathers every rank's generator states) and rank 0 writes.
//   RunCheckpoints checkpoints(session);
//   checkpoints.save(session, {checkpoints.best()});
//   throw TrainError("the training loss is nan at step 7" + checkpoints.last_good());
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "trainer/engine/session.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/io/checkpoint_names.hpp"
#include "trainer/util/clock.hpp"

namespace trainer {

class RunCheckpoints {
 public:
  explicit RunCheckpoints(const Session& session);

  // Whether this run saves checkpoints: true on every rank of a data-parallel run, where rank 0 writes them.
  bool enabled() const { return !dir_.empty() || distributed_; }
  const std::filesystem::path& last() const { return last_; }
  std::filesystem::path best() const { return dir_ / CheckpointNames::best(); }
  std::filesystem::path epoch(int64_t epoch) const { return dir_ / CheckpointNames::epoch(epoch); }
  std::filesystem::path step(int64_t step) const { return dir_ / CheckpointNames::step(step); }

  // Minutes since this run's last checkpoint was written (or since the run started).
  double minutes_since_write() const;

  // "; the last good checkpoint is RUN/last.pt (trainer --resume RUN/last.pt)" or "; no checkpoint was written
  // yet": the end of an error message that stops a run.
  std::string last_good() const;

  // Writes last.pt from the session and gives it the names in `also`. A model that went non-finite is never
  // written: the TrainError names the step and the last good checkpoint.
  void save(const Session& session, const std::vector<std::filesystem::path>& also = {});

  // last.pt and step-N.pt, then the step checkpoints beyond train.keep_last are removed, oldest first.
  void save_step(const Session& session);

  // last.pt after a step that failed on this rank alone: no collective (the other ranks are not saving), so the
  // file holds only this process's generator states. Writes only on rank 0.
  void save_after_failure(const Session& session);

 private:
  void write(const Session& session, const std::vector<std::filesystem::path>& also, const GeneratorRows& ranks);

  std::filesystem::path dir_, last_;
  nlohmann::json resolved_config_;
  int64_t keep_last_;
  bool distributed_;  // every rank takes part in a save; rank 0 writes
  bool warned_low_space_ = false;
  Clock::time_point last_write_ = Clock::now();
};

}  // namespace trainer
