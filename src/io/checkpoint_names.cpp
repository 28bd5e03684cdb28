#include "trainer/io/checkpoint_names.hpp"

#include <limits>

namespace trainer {

namespace {

// PREFIX<digits>.pt: the number, or nullopt.
std::optional<int64_t> numbered(const std::string& name, const std::string& prefix) {
  const std::string suffix = ".pt";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  int64_t n = 0;
  for (size_t i = prefix.size(); i < name.size() - suffix.size(); ++i) {
    const char c = name[i];
    if (c < '0' || c > '9') return std::nullopt;
    if (n > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

std::optional<CheckpointName> CheckpointNames::parse(const std::string& filename) {
  using Kind = CheckpointName::Kind;
  if (filename == last()) return CheckpointName{Kind::last, 0};
  if (filename == best()) return CheckpointName{Kind::best, 0};
  if (const auto n = numbered(filename, "epoch-")) return CheckpointName{Kind::epoch, *n};
  if (const auto n = numbered(filename, "step-")) return CheckpointName{Kind::step, *n};
  return std::nullopt;
}

}  // namespace trainer
