#include "trainer/data/sources/shard_source.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <exception>
#include <filesystem>
#include <thread>

#include "trainer/data/pixels/encoded_image.hpp"
#include "trainer/data/sources/encoded_sample.hpp"
#include "trainer/data/sources/pipe_shard.hpp"
#include "trainer/data/sources/shard_list.hpp"
#include "trainer/data/sources/shard_summary.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/http_range.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// The most fetched-ahead bytes held at once: the batches in flight (data.prefetch, at most 64) of ImageNet-sized
// images take a few tens of MB; this bounds a pipeline that stopped with fetched images unread.
constexpr uint64_t kReadAheadBytes = uint64_t{256} << 20;

// The read-ahead's fetches: image members' ranges, data.shards.read_ahead of them in flight on the read-ahead's one
// thread. A shard that reads from its copy in the cache by now is left to the workers (a disk read).
class ShardRanges : public ReadAhead::Transport {
 public:
  ShardRanges(const std::vector<std::shared_ptr<const ShardFile>>& shards, const std::vector<ShardAddress>& addresses,
              size_t connections)
      : shards_(shards), addresses_(addresses), ranges_(connections) {}
  size_t slots() const override { return ranges_.connections(); }
  bool start(size_t key, std::vector<uint8_t> buffer) override {
    const ShardAddress& a = addresses_.at(key);
    const ShardFile& shard = *shards_.at(a.shard);
    if (a.size == 0 || !shard.read_remotely()) return false;
    ranges_.start(key, shard.location(), a.offset, a.size, std::move(buffer));
    return true;
  }
  void wait(std::vector<Ended>& ended) override {
    done_.clear();
    ranges_.wait(done_);
    for (ConcurrentRanges::Ended& d : done_)
      ended.push_back({static_cast<size_t>(d.tag), d.error.empty(), std::move(d.bytes)});
  }
  void wake() override { ranges_.wake(); }

 private:
  const std::vector<std::shared_ptr<const ShardFile>>& shards_;
  const std::vector<ShardAddress>& addresses_;
  ConcurrentRanges ranges_;
  std::vector<ConcurrentRanges::Ended> done_;
};

}  // namespace

ShardSource::ShardSource(std::string root, std::vector<std::shared_ptr<const ShardFile>> shards, FileList keys,
                         std::vector<ShardAddress> addresses, std::vector<std::string> class_names, TransformSpec spec,
                         int64_t channels, size_t read_ahead, ShardOpening opening, std::vector<ShardCopyJob> copies)
    : root_(std::move(root)),
      shards_(std::move(shards)),
      keys_(std::move(keys)),
      addresses_(std::move(addresses)),
      class_names_(std::move(class_names)),
      spec_(spec),
      channels_(channels),
      opening_(std::move(opening)) {
  if (!copies.empty()) copier_ = std::make_unique<ShardCopier>(opening_.cache, opening_.cache_limit, std::move(copies));
  const bool remote = std::any_of(shards_.begin(), shards_.end(), [](const auto& s) { return s->remote(); });
  if (!remote || read_ahead == 0) return;
  read_ahead_ =
      std::make_unique<ReadAhead>(std::make_unique<ShardRanges>(shards_, addresses_, read_ahead), kReadAheadBytes);
}

void ShardSource::prefetch(const std::vector<size_t>& indices) const {
  if (!read_ahead_) return;
  try {
    read_ahead_->request(indices);
  } catch (const std::exception&) {
    // A hint that cannot be queued (no thread could start): the workers read these samples themselves.
  }
}

ShardCopier::Counts ShardSource::copy_counts() const { return copier_ ? copier_->counts() : ShardCopier::Counts{}; }

std::string ShardSource::take_news() const { return copier_ ? copier_->take_news() : std::string(); }

ReadAhead::Counts ShardSource::read_ahead_counts() const {
  return read_ahead_ ? read_ahead_->counts() : ReadAhead::Counts{};
}

void ShardSource::read_into(size_t i, const ReadContext& context, cv::Mat& out) const {
  EncodedImage unused;
  read_sample(i, context, out, /*defer=*/false, unused);
}

bool ShardSource::read_or_defer(size_t i, const ReadContext& context, cv::Mat& out, EncodedImage& deferred) const {
  return read_sample(i, context, out, /*defer=*/true, deferred);
}

bool ShardSource::read_encoded(size_t i, std::vector<uint8_t>& bytes) const {
  if (read_ahead_ && read_ahead_->take(i, bytes)) return true;
  const ShardAddress& a = addresses_.at(i);
  shards_[a.shard]->read(a.offset, a.size, bytes);
  return true;
}

bool ShardSource::read_sample(size_t i, const ReadContext& context, cv::Mat& out, bool defer,
                              EncodedImage& deferred) const {
  const auto start = context.times ? Clock::now() : Clock::time_point();
  thread_local std::vector<uint8_t> bytes;  // one buffer per worker, as the folder reader keeps
  read_encoded(i, bytes);
  const auto read_at = context.times ? Clock::now() : Clock::time_point();
  return render_or_defer(bytes, sample_name(i), i, context, spec_, channels_, out, defer, deferred, start, read_at);
}

std::string ShardSource::sample_name(size_t i) const {
  return shards_[addresses_.at(i).shard]->location() + "#" + keys_.path(i);
}

std::string ShardSource::describe() const {
  std::string opened;
  if (opening_.read_through > 0)
    opened += std::to_string(opening_.read_through) +
              " without an index, read through once to list their samples (an index beside each shard, as `trainer "
              "shards make` and DALI's wds2idx write, saves that), ";
  if (opening_.listed > 0)
    opened += std::to_string(opening_.listed) + " without an index, listed by an earlier start's read (in " +
              opening_.cache + "), ";
  if (opening_.piped + opening_.pipe_copies > 0)
    opened += std::to_string(opening_.piped + opening_.pipe_copies) + " from pipe: commands, copied in " +
              opening_.cache + " (" + std::to_string(opening_.piped) + " now, " + std::to_string(opening_.pipe_copies) +
              " by an earlier start), ";
  if (opening_.cache_limit > 0)
    opened += std::to_string(opening_.kept) + " read from copies in " + opening_.cache + " and " +
              std::to_string(copier_ ? copier_->jobs() : 0) + " to copy there as the run goes (data.shards.cache_mb " +
              std::to_string(opening_.cache_limit >> 20) + "), ";
  return "shards " + root_ + " (" + std::to_string(shards_.size()) + " shards, " + opened + std::to_string(size()) +
         " images, " + std::to_string(class_names_.size()) + " classes; " + describe_transform(spec_) + ")";
}

namespace {

constexpr uint64_t kMostImageBytes = uint64_t{512} << 20;

// What one shard contributes, gathered on the opening threads.
struct ShardSamples {
  std::shared_ptr<const ShardFile> file;
  std::vector<std::string> keys;
  std::vector<int64_t> labels;
  std::vector<ShardAddress> images;
  bool read_through = false;  // a remote shard without an index, read through once to list its samples
  bool listed = false;        // a remote shard without an index, listed by an earlier start's read (in the cache)
  enum class Piped { no, ran, cached } piped = Piped::no;  // a pipe: shard: its command ran now, or its copy was kept
  bool kept = false;                                       // a remote shard read from its copy in the cache
  ShardCopyJob copy;                                       // a remote shard to copy into the cache (no shard: none)
};

std::string member_list(const IndexedSample& s) {
  std::vector<std::string> exts;
  for (const IndexedMember& m : s.members) exts.push_back("." + m.ext);
  return exts.empty() ? "none" : join(exts);
}

// A label member's bytes as data.shards.label reads them: "cls", the number as text; "json:FIELD", an integer field.
int64_t parse_label(const std::vector<uint8_t>& bytes, const std::string& label_key, const std::string& where) {
  std::string text(bytes.begin(), bytes.end());
  if (label_key == "cls") {
    const size_t first = text.find_first_not_of(" \t\r\n"), last = text.find_last_not_of(" \t\r\n");
    int64_t value = 0;
    const char* begin = text.data() + (first == std::string::npos ? text.size() : first);
    const char* end = text.data() + (last == std::string::npos ? 0 : last + 1);
    const auto [stop, ec] = std::from_chars(begin, end, value);
    if (begin >= end || ec != std::errc() || stop != end)
      throw DataError(where + ": the .cls member holds \"" + text.substr(0, 40) + "\", not a class index");
    return value;
  }
  const std::string field = label_key.substr(5);
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_object() || !j.contains(field) || !j.at(field).is_number_integer())
      throw DataError(where + ": the .json member has no integer \"" + field + "\" (data.shards.label)");
    return j.at(field).get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(where + ": the .json member is not JSON: " + e.what());
  }
}

ShardSamples read_shard(const std::string& location, uint32_t shard_no, const ShardEntry* entry,
                        const ShardsConfig& config) {
  ShardSamples out;
  const std::string& label_key = config.label;
  const fs::path cache = shard_cache_folder(config);
  const bool caching = config.cache_mb > 0 && !cache.empty() && is_http_address(location);
  const fs::path copy = caching ? cache / shard_copy_name(location) : fs::path();
  std::error_code ec;
  if (is_pipe_address(location)) {
    const PipeShardCopy copy = pipe_shard_copy(location, {config.allow_pipe, cache.string()});
    out.piped = copy.ran ? ShardSamples::Piped::ran : ShardSamples::Piped::cached;
    out.file = std::make_shared<ShardFile>(location, copy.path.string());
  } else if (caching && fs::is_regular_file(copy, ec)) {
    out.kept = true;
    out.file = std::make_shared<ShardFile>(location, copy.string());
  } else {
    out.file = std::make_shared<ShardFile>(location);
  }
  const bool labels_known = entry && !entry->labels.empty();
  const std::string label_ext = label_key == "cls" ? "cls" : "json";
  ReadThrough through;
  if (!labels_known) through.keep_suffix = "." + label_ext;
  through.listings = cache;
  const std::vector<IndexedSample> samples = out.file->samples(/*write_index=*/true, &through);
  out.read_through = through.happened;
  out.listed = through.listed;
  if (caching && out.file->remote()) out.copy = shard_copy_job(out.file, copy, samples);
  if (entry && entry->samples != samples.size())
    throw DataError(location + ": " + kShardSummaryName + " says " + std::to_string(entry->samples) +
                    " samples, its index lists " + std::to_string(samples.size()));
  std::vector<uint8_t> bytes;
  for (size_t j = 0; j < samples.size(); ++j) {
    const IndexedSample& s = samples[j];
    const std::string where = location + "#" + s.key;
    const IndexedMember* image = s.image();
    if (!image)
      throw DataError(where + ": no image member (.jpg, .jpeg, .png, .webp, ...); the sample has " + member_list(s));
    // A remote index is not checked against its shard's size: a member past any photo's size is refused here, so a
    // hostile index cannot have a worker hold gigabytes for one image.
    if (image->size > kMostImageBytes)
      throw DataError(where + ": an image member of " + std::to_string(image->size) + " bytes (more than " +
                      std::to_string(kMostImageBytes >> 20) + " MiB, larger than any image the decoders take)");
    out.images.push_back({image->offset, static_cast<uint32_t>(image->size), shard_no});
    out.keys.push_back(s.key);
    if (labels_known) {
      out.labels.push_back(entry->labels[j]);
      continue;
    }
    const IndexedMember* label = s.find(label_ext);
    if (!label)
      throw DataError(where + ": no ." + label_ext + " member for its label; the sample has " + member_list(s));
    if (label->size > 4096)
      throw DataError(where + ": a ." + label_ext + " member of " + std::to_string(label->size) + " bytes");
    // A shard read through kept its labels' bytes; an indexed one is read a label at a time.
    if (const auto kept = through.kept.find(label->offset);
        kept != through.kept.end() && kept->second.size() == label->size)
      bytes.assign(kept->second.begin(), kept->second.end());
    else out.file->read(label->offset, label->size, bytes);
    out.labels.push_back(parse_label(bytes, label_key, where));
  }
  return out;
}

// Every shard read on a few threads (a remote index is a round trip); the first failure in shard order is thrown.
std::vector<ShardSamples> read_shards(const std::vector<std::string>& locations,
                                      const std::vector<const ShardEntry*>& entries, const ShardsConfig& config) {
  std::vector<ShardSamples> shards(locations.size());
  std::vector<std::exception_ptr> errors(locations.size());
  std::atomic<size_t> next{0};
  const size_t threads = std::min<size_t>(locations.size(), 8);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < locations.size(); i = next++) {
        try {
          shards[i] = read_shard(locations[i], static_cast<uint32_t>(i), entries[i], config);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    });
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return shards;
}

std::optional<ShardSummary> read_summary(const std::string& root) {
  const std::string where = shard_location(root, kShardSummaryName);
  std::vector<uint8_t> bytes;
  if (is_http_address(where)) {
    try {
      http_read(where, 0, 0, bytes);
    } catch (const HttpStatusError& e) {
      if (e.status() == 404) return std::nullopt;  // no summary: the shards' own labels are read
      throw DataError(e.message());
    } catch (const Error& e) {
      throw DataError(e.message());
    }
  } else {
    std::error_code ec;
    if (!fs::exists(fs::path(where), ec)) return std::nullopt;
    if (const std::error_code read = read_file(fs::path(where), bytes))
      throw DataError(where + ": cannot read: " + read.message());
  }
  return parse_shard_summary(std::string(bytes.begin(), bytes.end()), where);
}

}  // namespace

std::shared_ptr<const ShardSource> open_shards(const DataConfig& data, bool train, int64_t num_classes,
                                               int64_t channels, std::optional<bool> augment) {
  const std::string split = train ? "train" : "val";
  const std::string& spec = train ? data.shards.train : data.shards.val;
  const std::optional<ShardSummary> summary = read_summary(data.root);
  std::vector<std::string> locations;
  std::vector<const ShardEntry*> entries;
  const std::vector<ShardEntry>* listed = nullptr;
  if (summary && summary->splits.count(split)) listed = &summary->splits.at(split);
  if (!spec.empty()) {
    locations = list_shards(data.root, spec);
    for (const auto& location : locations) {  // the summary's labels still serve the shards it lists
      const ShardEntry* found = nullptr;
      if (listed)
        for (const ShardEntry& e : *listed)
          if (shard_location(data.root, e.name) == location) found = &e;
      entries.push_back(found);
    }
  } else if (listed && !listed->empty()) {
    for (const ShardEntry& e : *listed) {
      locations.push_back(shard_location(data.root, e.name));
      entries.push_back(&e);
    }
  } else {
    throw DataError(shard_location(data.root, kShardSummaryName) + ": " +
                    (summary ? "lists no " + split + " shards" : std::string("not found")) + ", and data.shards." +
                    split + " does not name the shards (a brace pattern, a .txt list or a folder)");
  }
  if (locations.size() > UINT32_MAX) throw DataError(data.root + ": more than 4294967295 shards");
  std::vector<ShardSamples> shards = read_shards(locations, entries, data.shards);

  std::vector<std::string> classes;
  if (summary) classes = summary->classes;
  else if (!data.class_names.empty()) classes = data.class_names;
  int64_t largest = -1;
  for (const auto& s : shards)
    for (int64_t label : s.labels) largest = std::max(largest, label);
  if (classes.empty()) {
    const int64_t count = num_classes > 0 ? num_classes : largest + 1;
    for (int64_t c = 0; c < count; ++c) classes.push_back(std::to_string(c));
  }
  if (num_classes != 0 && static_cast<int64_t>(classes.size()) != num_classes)
    throw DataError(data.root + ": " + std::to_string(classes.size()) + " classes, but model.num_classes is " +
                    std::to_string(num_classes) + " (leave model.num_classes out, or 0, to take the shards' count)");

  std::vector<std::shared_ptr<const ShardFile>> files;
  FileList keys;
  std::vector<ShardAddress> addresses;
  ShardOpening opening;
  opening.cache = shard_cache_folder(data.shards).string();
  opening.cache_limit = static_cast<uint64_t>(data.shards.cache_mb) << 20;
  std::vector<ShardCopyJob> copies;
  for (auto& s : shards) {
    opening.kept += s.kept;
    if (s.copy.shard && s.copy.bytes > 0) copies.push_back(std::move(s.copy));
    opening.read_through += s.read_through;
    opening.listed += s.listed;
    opening.piped += s.piped == ShardSamples::Piped::ran;
    opening.pipe_copies += s.piped == ShardSamples::Piped::cached;
    for (size_t j = 0; j < s.keys.size(); ++j) {
      if (s.labels[j] < 0 || s.labels[j] >= static_cast<int64_t>(classes.size()))
        throw DataError(s.file->location() + "#" + s.keys[j] + ": label " + std::to_string(s.labels[j]) +
                        " outside the " + std::to_string(classes.size()) + " classes");
      keys.add(s.keys[j], s.labels[j]);
      addresses.push_back(s.images[j]);
    }
    files.push_back(std::move(s.file));
  }
  if (addresses.empty()) throw DataError(data.root + ": the " + split + " shards hold no samples");
  return std::make_shared<ShardSource>(data.root, std::move(files), std::move(keys), std::move(addresses),
                                       std::move(classes), make_transform_spec(data, augment.value_or(train)), channels,
                                       static_cast<size_t>(data.shards.read_ahead), std::move(opening),
                                       std::move(copies));
}

}  // namespace trainer
