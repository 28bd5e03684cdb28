// `trainer shards make SRC DEST`: an image folder (the ImageNet layout, train/<class>/* with val/ + val_label.txt
// or val/<class>/*; or class folders directly under SRC) packed into WebDataset shards with their indexes and
// shards.json. `trainer shards check DEST`: every shard read from its tar headers and compared with its index and
// the summary, every image's header checked.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <map>

#include "trainer/cli/commands.hpp"
#include "trainer/data/pixels/image_decode.hpp"
#include "trainer/data/sources/folder_source.hpp"
#include "trainer/data/sources/shard_file.hpp"
#include "trainer/data/sources/shard_list.hpp"
#include "trainer/data/sources/shard_writer.hpp"
#include "trainer/engine/progress.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/platform/process.hpp"
#include "trainer/util/clock.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

struct ShardsArgs {
  std::string source;
  std::string dest;
  double shard_mb = 256;
};

// The member extension of an image file: lower case, and "jpg" for every JPEG name (webdataset's and DALI's usual
// key for JPEG images).
std::string image_ext(const std::string& path) {
  std::string ext = ascii_lower(fs::path(path).extension().string().substr(1));
  return ext == "jpeg" ? "jpg" : ext;
}

// A split's images in order (the folder's order: classes by name, files by name), with a live progress line on a
// terminal and one line per split.
void pack_split(ShardWriter& writer, const FolderSource& split, const std::string& name, Clock::time_point start) {
  writer.begin_split(name);
  ProgressLine progress(stdout_is_terminal());
  std::vector<uint8_t> bytes;
  char key[32];
  auto status = [&](size_t done) {
    const double mb = static_cast<double>(writer.bytes_written()) / 1e6;
    char line[160];
    std::snprintf(line, sizeof(line), "%s: %zu/%zu images, %zu shards, %.0f MB, %.1f MB/s", name.c_str(), done,
                  split.size(), writer.summary().splits.at(name).size(), mb, mb / std::max(seconds_since(start), 1e-9));
    return std::string(line);
  };
  for (size_t i = 0; i < split.size(); ++i) {
    split.read_encoded(i, bytes);
    std::snprintf(key, sizeof(key), "%09zu", i);
    writer.add(key, image_ext(split.file(i).string()), bytes, split.label(i));
    if (progress.enabled()) progress.show(status(i + 1));
  }
  progress.clear();
  std::printf("%s\n", status(split.size()).c_str());
}

int run_shards_make(const ShardsArgs& a) {
  if (!(a.shard_mb > 0)) throw UsageError("--shard-mb: expected a size in MB > 0");
  std::error_code ec;
  if (!fs::is_directory(a.source, ec)) throw DataError(a.source + ": no such folder");
  // Shards of an earlier pack left beside the new ones would be read by a folder or pattern spec.
  if (fs::is_directory(a.dest, ec))
    for (const auto& entry : fs::directory_iterator(a.dest, ec))
      if (entry.path().extension() == ".tar" || entry.path().filename() == kShardSummaryName)
        throw UsageError(a.dest + " already holds shards (" + entry.path().filename().string() +
                         "): remove them, or pack into another folder");
  DataConfig data;
  data.root = a.source;
  const bool imagenet_layout = fs::is_directory(fs::path(a.source) / data.train_dir, ec);
  if (!imagenet_layout) data.train_dir = ".";
  const auto train = open_image_folder(data, /*train=*/true, 0, 3, /*augment=*/false);
  ShardWriter writer(a.dest, static_cast<uint64_t>(a.shard_mb * 1e6));
  const auto start = Clock::now();
  pack_split(writer, *train, "train", start);
  if (imagenet_layout && fs::is_directory(fs::path(a.source) / data.val_dir, ec))
    pack_split(writer, *open_image_folder(data, /*train=*/false, 0, 3, false), "val", start);
  writer.finish(train->class_names());
  size_t shards = 0, samples = 0;
  for (const auto& [split, entries] : writer.summary().splits)
    for (const ShardEntry& e : entries) {
      ++shards;
      samples += e.samples;
    }
  const double seconds = seconds_since(start), mb = static_cast<double>(writer.bytes_written()) / 1e6;
  std::printf("packed %zu images into %zu shards (%.1f MB) in %.1f s, %.1f MB/s: %s\n", samples, shards, mb, seconds,
              mb / std::max(seconds, 1e-9), (fs::path(a.dest) / kShardSummaryName).string().c_str());
  return 0;
}

// One shard against its index and its summary entry: what differs, as lines (empty: it agrees).
std::vector<std::string> check_shard(const std::string& location, const ShardEntry* entry) {
  std::vector<std::string> problems;
  const ShardFile file(location);
  MappedFile mapped;
  if (const std::error_code ec = mapped.open(location)) throw DataError(location + ": cannot read: " + ec.message());
  const std::vector<IndexedSample> from_tar =
      group_samples(list_tar_members(reinterpret_cast<const uint8_t*>(mapped.data()), mapped.size(), location));
  std::error_code ec;
  if (!fs::exists(fs::path(shard_index_location(location)), ec)) {
    problems.push_back(shard_index_location(location) + ": missing (a run writes it on its first read of the shard)");
  } else {
    const std::vector<IndexedSample> indexed = file.samples(false);
    if (indexed.size() != from_tar.size())
      problems.push_back(location + ": its index lists " + std::to_string(indexed.size()) + " samples, the tar holds " +
                         std::to_string(from_tar.size()));
    for (size_t i = 0; i < std::min(indexed.size(), from_tar.size()) && problems.empty(); ++i) {
      const auto &a = indexed[i].members, &b = from_tar[i].members;
      bool same = a.size() == b.size();
      for (size_t m = 0; same && m < a.size(); ++m)
        same = a[m].ext == b[m].ext && a[m].offset == b[m].offset && a[m].size == b[m].size;
      if (!same) problems.push_back(location + "#" + from_tar[i].key + ": its index entry disagrees with the tar");
    }
  }
  if (entry && entry->samples != from_tar.size())
    problems.push_back(location + ": " + kShardSummaryName + " says " + std::to_string(entry->samples) +
                       " samples, the tar holds " + std::to_string(from_tar.size()));
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < from_tar.size(); ++i) {
    const IndexedSample& s = from_tar[i];
    const std::string where = location + "#" + s.key;
    try {
      const IndexedMember* cls = s.find("cls");
      if (entry && !entry->labels.empty() && i < entry->labels.size()) {
        if (!cls) throw DataError(where + ": no .cls member");
        file.read(cls->offset, cls->size, bytes);
        if (std::string(bytes.begin(), bytes.end()) != std::to_string(entry->labels[i]))
          throw DataError(where + ": .cls holds \"" + std::string(bytes.begin(), bytes.end()) + "\", " +
                          kShardSummaryName + " says " + std::to_string(entry->labels[i]));
      }
      const IndexedMember* image = s.image();
      if (!image) throw DataError(where + ": no image member");
      file.read(image->offset, image->size, bytes);
      check_image_header(probe_image(bytes), where);
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  return problems;
}

int run_shards_check(const ShardsArgs& a) {
  std::vector<std::pair<std::string, const ShardEntry*>> shards;
  std::optional<ShardSummary> summary;
  const fs::path summary_path = fs::path(a.dest) / kShardSummaryName;
  std::error_code ec;
  if (fs::exists(summary_path, ec)) {
    std::vector<uint8_t> text;
    if (read_file(summary_path, text)) throw DataError(summary_path.string() + ": cannot read");
    summary = parse_shard_summary(std::string(text.begin(), text.end()), summary_path.string());
    for (const auto& [split, entries] : summary->splits)
      for (const ShardEntry& e : entries) shards.push_back({shard_location(a.dest, e.name), &e});
  } else {
    for (const std::string& location : list_shards(a.dest, ".")) shards.push_back({location, nullptr});
  }
  size_t bad = 0, samples = 0;
  for (const auto& [location, entry] : shards) {
    std::vector<std::string> problems;
    try {
      problems = check_shard(location, entry);
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
    for (const auto& p : problems) std::printf("%s\n", first_line(p).c_str());
    bad += problems.empty() ? 0 : 1;
    samples += entry ? entry->samples : 0;
  }
  std::printf("%s: %zu shards checked, %zu with problems%s\n", a.dest.c_str(), shards.size(), bad,
              summary ? (", " + std::to_string(samples) + " samples in " + kShardSummaryName).c_str() : "");
  return bad == 0 ? 0 : 1;
}

}  // namespace

void add_shards_command(CLI::App& app, Commands& commands) {
  CLI::App* cmd = app.add_subcommand("shards", "WebDataset tar shards: pack an image folder into them, or check them");
  cmd->require_subcommand(1);
  auto args = std::make_shared<ShardsArgs>();
  CLI::App* make = cmd->add_subcommand(
      "make",
      "pack SRC (train/<class>/* with val/, or <class>/*) into DEST/train-*.tar, val-*.tar, their .idx "
      "files and shards.json; the same folder always makes the same bytes");
  make->add_option("src", args->source, "the image folder")->required();
  make->add_option("dest", args->dest, "the folder to write the shards to")->required();
  make->add_option("--shard-mb", args->shard_mb, "about this many MB per shard (default 256)");
  commands.push_back({make, [args] { return run_shards_make(*args); }});
  CLI::App* check = cmd->add_subcommand(
      "check", "read every shard of DEST from its tar headers and compare it with its index and shards.json");
  check->add_option("dest", args->dest, "the folder of shards")->required();
  commands.push_back({check, [args] { return run_shards_check(*args); }});
}

}  // namespace trainer
