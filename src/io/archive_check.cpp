#include "trainer/io/archive_check.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string_view>

#include "trainer/io/pickle_scan.hpp"
#include "trainer/io/zip_records.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

std::optional<std::string> archive_pickle_problem(const char* data, size_t size) {
  // No pickle LibTorch writes for a ResNet comes near 64 MiB (a checkpoint's data.pkl is a few kilobytes).
  constexpr size_t kMostPickleBytes = size_t{64} << 20;
  const auto records = zip_records(data, size);
  std::map<std::string, uint64_t, std::less<>> record_sizes;
  for (const ZipRecord& r : records) record_sizes[r.name] = r.inflated_size;
  for (const ZipRecord& r : records) {
    const bool data_pickle = ends_with(r.name, ".pkl");
    if (!data_pickle && !ends_with(r.name, ".debug_pkl")) continue;
    const std::string storage_folder = data_pickle ? r.name.substr(0, r.name.size() - 4) + "/" : std::string();
    const auto record_size = [&](std::string_view key) -> std::optional<uint64_t> {
      if (storage_folder.empty()) return std::nullopt;
      const auto it = record_sizes.find(storage_folder + std::string(key));
      if (it == record_sizes.end()) return std::nullopt;
      return it->second;
    };
    const auto contents = record_contents(r, kMostPickleBytes);
    if (!contents) return "record " + r.name + ": does not inflate to its declared size, or is over 64 MiB";
    if (const auto problem = pickle_tensor_problem(*contents, record_size)) return "record " + r.name + ": " + *problem;
  }
  return std::nullopt;
}

}  // namespace trainer
