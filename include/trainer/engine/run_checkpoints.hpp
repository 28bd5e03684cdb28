// The checkpoints of one run folder. last.pt is rewritten at every save; the other names are hard links to the
// file last.pt was at that moment: best.pt, epoch-E.pt (train.keep_every_epochs) and step-N.pt (the newest
// train.keep_last of them). A session without a run folder (a benchmark) saves nothing.
//   RunCheckpoints checkpoints(session);
//   checkpoints.save(session, {checkpoints.best()});
//   throw TrainError("the training loss is nan at step 7" + checkpoints.last_good());
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "trainer/engine/session.hpp"

namespace trainer {

class RunCheckpoints {
 public:
  explicit RunCheckpoints(const Session& session);

  bool enabled() const { return !dir_.empty(); }
  const std::filesystem::path& last() const { return last_; }
  std::filesystem::path best() const { return dir_ / "best.pt"; }
  std::filesystem::path epoch(int64_t epoch) const { return dir_ / ("epoch-" + std::to_string(epoch) + ".pt"); }
  std::filesystem::path step(int64_t step) const { return dir_ / ("step-" + std::to_string(step) + ".pt"); }

  // "; the last good checkpoint is RUN/last.pt" or "; no checkpoint was written yet": the end of an error
  // message that stops a run.
  std::string last_good() const;

  // Writes last.pt from the session and gives it the names in `also`. A model that went non-finite is never
  // written: the TrainError names the step and the last good checkpoint.
  void save(const Session& session, const std::vector<std::filesystem::path>& also = {});

  // last.pt and step-N.pt, then the step checkpoints beyond train.keep_last are removed, oldest first.
  void save_step(const Session& session);

 private:
  std::filesystem::path dir_, last_;
  nlohmann::json resolved_config_;
  int64_t keep_last_;
};

}  // namespace trainer
