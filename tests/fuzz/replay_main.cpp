// Runs every input of a fuzz target's corpus through it, without libFuzzer: ctest calls it for each target with
// tests/fuzz/corpus/<name>/, so an input that once crashed a reader is read again on every build.
//   trainer_fuzz_replay pth tests/fuzz/corpus/pth [more files or folders]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/targets.hpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const FuzzTarget* target = nullptr;
  for (const auto& t : kFuzzTargets)
    if (argc > 1 && std::strcmp(argv[1], t.name) == 0) target = &t;
  if (!target) {
    std::fprintf(stderr, "usage: trainer_fuzz_replay TARGET FILE_OR_FOLDER...; targets:");
    for (const auto& t : kFuzzTargets) std::fprintf(stderr, " %s", t.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& entry : fs::directory_iterator(argv[i]))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else if (fs::is_regular_file(argv[i])) {
      inputs.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "trainer_fuzz_replay: %s: no such file or folder\n", argv[i]);
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "trainer_fuzz_replay: no inputs for %s\n", target->name);
    return 2;
  }
  for (const auto& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::printf("%s %s (%zu bytes)\n", target->name, input.filename().string().c_str(), bytes.size());
    std::fflush(stdout);  // the last line printed names the input that stopped it
    target->run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: %zu inputs read, none crashed\n", target->name, inputs.size());
  return 0;
}
