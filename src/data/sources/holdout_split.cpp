#include "trainer/data/sources/holdout_split.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_set>

#include "trainer/util/error.hpp"
#include "trainer/util/hash.hpp"

namespace trainer {

namespace {

// FNV-1a over the name, then mixed with the seed: a file's rank within its class depends on its own name only,
// so adding photos to a class moves at most the boundary, never the others.
uint64_t name_key(const std::string& name, int64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return hash_combine(static_cast<uint64_t>(seed), h);
}

}  // namespace

std::vector<std::string> choose_holdout(const FileList& files, const std::vector<std::string>& class_names,
                                        double fraction, int64_t seed) {
  std::map<int64_t, std::vector<size_t>> by_class;
  for (size_t i = 0; i < files.size(); ++i) by_class[files.label(i)].push_back(i);
  std::vector<bool> held(files.size(), false);
  for (auto& [label, members] : by_class) {
    const size_t n = members.size();
    const std::string name =
        label >= 0 && static_cast<size_t>(label) < class_names.size() ? class_names[label] : std::to_string(label);
    if (n < 2)
      throw DataError("data.val_fraction: class \"" + name + "\" has " + std::to_string(n) +
                      " image; a class needs at least 2 to have one in each split (add images, or give the "
                      "validation images a val/ folder of their own)");
    const auto wanted = static_cast<size_t>(std::llround(fraction * static_cast<double>(n)));
    const size_t take = std::clamp<size_t>(wanted, 1, n - 1);
    std::vector<std::pair<uint64_t, size_t>> ranked;
    for (const size_t i : members) ranked.emplace_back(name_key(files.path(i), seed), i);
    std::sort(ranked.begin(), ranked.end());
    for (size_t k = 0; k < take; ++k) held[ranked[k].second] = true;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < files.size(); ++i)
    if (held[i]) out.push_back(files.path(i));
  return out;
}

HoldoutLists split_holdout(const FileList& files, const std::vector<std::string>& held_out,
                           const std::filesystem::path& folder) {
  std::unordered_set<std::string> wanted;
  for (const auto& name : held_out)
    if (!wanted.insert(name).second) throw DataError("data.val_files names " + name + " twice");
  HoldoutLists lists;
  size_t found = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string path = files.path(i);
    if (wanted.count(path)) {
      lists.val.add(path, files.label(i));
      ++found;
    } else {
      lists.train.add(path, files.label(i));
    }
  }
  if (found != wanted.size()) {
    std::unordered_set<std::string> present;
    for (size_t i = 0; i < files.size(); ++i) present.insert(files.path(i));
    for (const auto& name : held_out)
      if (!present.count(name))
        throw DataError((folder / name).string() +
                        ": held out for validation by this run (data.val_files) but no longer in its class folder; "
                        "the recorded split cannot be kept (restore the file, or start a new run)");
  }
  return lists;
}

}  // namespace trainer
