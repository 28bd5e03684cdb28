#include "trainer/data/sources/shard_summary.hpp"

#include <nlohmann/json.hpp>

#include "trainer/util/error.hpp"

namespace trainer {

namespace {

constexpr const char* kFormat = "trainer-shards 1";

// A shard's name stays under the summary's folder: no absolute path, no "..", no address of another host.
bool contained_name(const std::string& name) {
  if (name.empty() || name[0] == '/' || name[0] == '\\' || name.find(':') != std::string::npos) return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find_first_of("/\\", start);
    if (end == std::string::npos) end = name.size();
    if (name.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

ShardSummary parse_shard_summary(const std::string& text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(where + ": not JSON: " + e.what());
  }
  ShardSummary s;
  try {
    if (!j.is_object() || j.value("format", std::string()) != kFormat)
      throw DataError(where + ": expected a \"format\": \"" + std::string(kFormat) + "\" summary of shards");
    s.classes = j.at("classes").get<std::vector<std::string>>();
    for (const auto& [split, shards] : j.at("splits").items()) {
      std::vector<ShardEntry>& entries = s.splits[split];
      for (const auto& e : shards) {
        ShardEntry entry{e.at("name").get<std::string>(), e.at("samples").get<uint64_t>(),
                         e.value("bytes", uint64_t{0}), e.value("labels", std::vector<int64_t>{})};
        const std::string at = where + ": " + split + " shard " + entry.name;
        if (!contained_name(entry.name)) throw DataError(at + ": a shard's name must stay under the summary's folder");
        if (!entry.labels.empty() && entry.labels.size() != entry.samples)
          throw DataError(at + ": " + std::to_string(entry.labels.size()) + " labels for " +
                          std::to_string(entry.samples) + " samples");
        for (int64_t label : entry.labels)
          if (label < 0 || label >= static_cast<int64_t>(s.classes.size()))
            throw DataError(at + ": label " + std::to_string(label) + " outside the " +
                            std::to_string(s.classes.size()) + " classes");
        entries.push_back(std::move(entry));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(where + ": " + e.what());
  }
  return s;
}

std::string format_shard_summary(const ShardSummary& summary) {
  nlohmann::json splits = nlohmann::json::object();
  for (const auto& [split, entries] : summary.splits) {
    nlohmann::json list = nlohmann::json::array();
    for (const ShardEntry& e : entries)
      list.push_back({{"name", e.name}, {"samples", e.samples}, {"bytes", e.bytes}, {"labels", e.labels}});
    splits[split] = list;
  }
  const nlohmann::json j{{"format", kFormat}, {"classes", summary.classes}, {"splits", splits}};
  return j.dump() + "\n";
}

}  // namespace trainer
