// What the fuzz targets share. Each target (tests/fuzz/<name>_fuzz.cpp) feeds bytes to the entry point the trainer
// itself uses; the fuzz lane (scripts/lanes/fuzz.sh) links each with libFuzzer under ASan and UBSan, and the normal
// build links them all into trainer_fuzz_replay, which ctest runs over tests/fuzz/corpus/<name>/.
// The one outcome allowed besides success is the trainer's own one-line error (trainer::Error): any other
// exception, a crash, a sanitizer report, a hang or a huge allocation is a finding.
//   TRAINER_FUZZ_TARGET(glob) { refused_cleanly([&] { glob_match(text(data, size), "x"); }); return 0; }
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/archive_edits.hpp"
#include "trainer/util/error.hpp"

// The target as a function named after it (targets.hpp): the replay calls them all; in the fuzz lane each is
// linked with a generated LLVMFuzzerTestOneInput that calls it (CMakeLists.txt, TRAINER_LIBFUZZER).
#define TRAINER_FUZZ_TARGET(name) int fuzz_##name(const uint8_t* data, size_t size)

namespace trainer::fuzz {

// Runs `read`; the trainer's own error (a clear one-line refusal) is the expected end of a hostile input. Anything
// else escapes and stops the process, which libFuzzer and the replay report with the input.
template <class Read>
void refused_cleanly(Read&& read) {
  try {
    read();
  } catch (const trainer::Error&) {
  }
}

// A folder of this process's own under the system's temp folder, removed at exit: readers
// that take a path get the input written there.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // `bytes` as the file `name` in the folder (replacing it); its path.
  std::filesystem::path write(const std::string& name, const std::string& bytes) const;

 private:
  std::filesystem::path path_;
};

// The target's scratch folder, made on its first input.
const ScratchDir& scratch();

// The input with every stored zip record's CRC-32 made to match its bytes (support/archive_edits.hpp): the CRC check
// then lets it through to LibTorch's reader, and what that reader does with hostile structure gets fuzzed too.
using testing::with_matching_crcs;

// A real checkpoint small enough to fuzz whole (~350 KB): mnist_cnn at 6x6 after one SGD step with momentum, with
// EMA weights, saved by save_checkpoint with `config` as its saved config (null: the run's own resolved config).
std::string small_checkpoint(const nlohmann::json& config = nullptr);

// Everything --resume and eval do with a checkpoint after the open: its saved config resolved and checked, the model
// built from it with the file's weights and EMA weights, the optimizer's state and the generators' states restored.
// The trainer's one-line error is the expected end of a hostile input, as in refused_cleanly.
void restore_everything(const std::filesystem::path& checkpoint);

// The input split at the first `count - 1` occurrences of `separator` (fewer parts when it has fewer).
std::vector<std::string> split(const uint8_t* data, size_t size, char separator, size_t count);

}  // namespace trainer::fuzz
