// The names of a run folder's checkpoints, made and read in one place: last.pt (rewritten at every save),
// best.pt, epoch-E.pt and step-N.pt (second names of what last.pt was then).
//   run_dir / CheckpointNames::step(120)                           "step-120.pt"
//   if (auto n = CheckpointNames::parse(name); n && n->kind == CheckpointName::Kind::step) ... n->number
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace trainer {

struct CheckpointName {
  enum class Kind { last, best, epoch, step };
  Kind kind = Kind::last;
  int64_t number = 0;  // the epoch or the step; 0 for last.pt and best.pt
};

struct CheckpointNames {
  static std::string last() { return "last.pt"; }
  static std::string best() { return "best.pt"; }
  static std::string epoch(int64_t epoch) { return "epoch-" + std::to_string(epoch) + ".pt"; }
  static std::string step(int64_t step) { return "step-" + std::to_string(step) + ".pt"; }

  // What a file name in a run folder is; nullopt for any other file (a number too large for int64_t included).
  static std::optional<CheckpointName> parse(const std::string& filename);
};

}  // namespace trainer
