// Where `--resume auto` continues a run (a requeued SLURM job, a torchrun restart, a machine that rebooted: the
// same command line again): the newest checkpoint of the run folder that loads and whose weights pass their
// checksums, among last.pt, step-N.pt and epoch-E.pt, newest step first. A damaged or unreadable file is passed
// over with its reason; none at all means a new run in that folder.
//   const ResumePoint p = find_resume_point(run_dir);
//   for (const auto& note : p.notes) log(note);
//   if (p.checkpoint) resume(*p.checkpoint); else start();
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace trainer {

struct ResumePoint {
  std::optional<std::filesystem::path> checkpoint;  // none: nothing to resume
  std::vector<std::string> notes;                   // which file was taken and why, and each one passed over
};

ResumePoint find_resume_point(const std::filesystem::path& run_dir);

}  // namespace trainer
