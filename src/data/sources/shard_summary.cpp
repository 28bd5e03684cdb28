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
    for (const auto& item : j.at("splits").items()) {
      const std::string split = item.key();
      const nlohmann::json& shards = item.value();
      std::vector<ShardEntry>& entries = s.splits[split];
      for (const auto& e : shards) {
        // Counts and labels must be JSON integers: nlohmann converts a float past the type's range undefinedly.
        const auto whole = [&](const char* key, bool required) -> uint64_t {
          if (!e.is_object() || !e.contains(key)) {
            if (required) throw DataError(where + ": " + split + ": a shard without \"" + key + "\"");
            return 0;
          }
          if (!e.at(key).is_number_unsigned())
            throw DataError(where + ": " + split + ": \"" + key + "\" is not a whole number from 0 to 2^64-1");
          return e.at(key).get<uint64_t>();
        };
        ShardEntry entry{e.at("name").get<std::string>(), whole("samples", true), whole("bytes", false), {}};
        const std::string at = where + ": " + split + " shard " + entry.name;
        for (const auto& label : e.value("labels", nlohmann::json::array())) {
          if (!label.is_number_integer()) throw DataError(at + ": a label that is not a whole number");
          entry.labels.push_back(label.get<int64_t>());
        }
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
