#include "trainer/data/sources/shard_cache.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <system_error>

#include "trainer/data/sources/tar_members.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/http_range.hpp"
#include "trainer/util/sha256.hpp"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// A member past this offset is in no shard a disk holds: its index is wrong or hostile, and the shard is not copied.
constexpr uint64_t kMostShardBytes = uint64_t{1} << 50;

std::string sha256_hex(const std::string& text) {
  Sha256 digest;
  digest.update(text.data(), text.size());
  return digest.hex_digest();
}

std::string megabytes(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MB"; }

}  // namespace

fs::path shard_cache_folder(const ShardsConfig& config) {
  if (!config.cache.empty()) return fs::path(config.cache);
  const fs::path user = user_cache_folder();
  return user.empty() ? user : user / "trainer" / "shards";
}

std::string shard_copy_name(const std::string& address_or_command, const std::string& version) {
  // An address's query is left out: a presigned address (S3's X-Amz-Signature) changes whenever it is signed again,
  // the object it names does not.
  const std::string source = is_http_address(address_or_command)
                                 ? address_or_command.substr(0, address_or_command.find_first_of("?#"))
                                 : address_or_command;
  std::string name = sha256_hex(version.empty() ? source : source + "\n" + version).substr(0, 24);
  const size_t tar = source.rfind(".tar");
  if (tar == std::string::npos) return name + ".tar";
  const size_t stop = source.find_last_of(" \t\r\n/\\:\"'", tar);
  const size_t begin = stop == std::string::npos ? 0 : stop + 1;
  std::string shard = source.substr(begin, tar - begin);
  shard = shard.substr(0, shard.find('.'));
  for (char& c : shard)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  if (shard.size() > 64) shard.resize(64);
  return shard.empty() ? name + ".tar" : name + "-" + shard + ".tar";
}

uint64_t folder_bytes(const fs::path& folder) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    const uint64_t size = it->is_regular_file(size_ec) ? it->file_size(size_ec) : 0;
    if (!size_ec) total += size;
  }
  return total;
}

ShardCopyJob shard_copy_job(std::shared_ptr<const ShardFile> shard, fs::path copy,
                            const std::vector<IndexedSample>& samples) {
  ShardCopyJob job;
  uint64_t end = 0;
  for (const IndexedSample& s : samples)
    for (const IndexedMember& m : s.members) {
      if (m.offset > kMostShardBytes || m.size > kMostShardBytes) return job;
      end = std::max(end, (m.offset + m.size + 511) / 512 * 512);
    }
  job.bytes = end + 1024;  // the end-of-archive blocks
  job.copy = std::move(copy);
  const std::string index = format_shard_index(samples);
  job.index_bytes = index.size();
  job.index_digest = sha256_hex(index);
  job.shard = std::move(shard);
  return job;
}

void copy_remote_shard(const ShardCopyJob& job, const std::atomic<bool>& stop) {
  const std::string& where = job.shard->location();
  TarMemberStream tar(where);
  uint64_t got = 0;
  std::string index;
  try {
    write_file_atomically(job.copy, [&](const ByteSink& sink) {
      HttpOptions options;
      options.stop = &stop;
      http_stream(
          where,
          [&](const uint8_t* data, size_t size) {
            const size_t take = static_cast<size_t>(std::min<uint64_t>(size, job.bytes - got));
            sink(data, take);
            tar.feed(data, take);
            got += take;
            return got < job.bytes;  // the rest is the archive's padding
          },
          options);
      if (got < job.bytes)
        throw DataError(where + ": the shard ends at " + std::to_string(got) + " bytes, before its index's last " +
                        "member and the end-of-archive blocks (" + std::to_string(job.bytes) + " bytes)");
      index = format_shard_index(group_samples(tar.finish()));
      if (sha256_hex(index) != job.index_digest)
        throw DataError(where + ": its tar lists other members than its index does");
    });
  } catch (const DataError&) {
    throw;
  } catch (const Error& e) {
    throw DataError(where + ": " + e.message());
  }
  // The index beside the copy (a copy left without one, by a crash here, gets it at its next opening).
  write_shard_index_beside(job.copy.string(), index);
  job.shard->use_copy(job.copy.string());
}

ShardCopier::ShardCopier(fs::path folder, uint64_t limit, std::vector<ShardCopyJob> jobs)
    : folder_(std::move(folder)), limit_(limit), jobs_(std::move(jobs)) {
  thread_ = std::thread([this] { run(); });
}

ShardCopier::~ShardCopier() {
  stop_ = true;
  thread_.join();
}

bool ShardCopier::take_turn(FileLock& lock) {
  const fs::path path = folder_ / kCopyLockName;
  while (!stop_) {
    bool held = false;
    if (const std::error_code ec = lock.try_lock(path, held)) {
      std::lock_guard<std::mutex> guard(mutex_);
      if (counts_.lock_problem.empty()) counts_.lock_problem = path.string() + ": " + ec.message();
      return true;
    }
    if (held) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // another copier's turn: a shard takes far longer
  }
  return false;
}

void ShardCopier::run() {
  std::error_code ec;
  fs::create_directories(folder_, ec);
  for (const ShardCopyJob& job : jobs_) {
    // A copy another copier made since the opening (a second rank's) is used as it is: copies appear whole (renamed
    // into place), so only making one takes a turn, and whether it is still missing is asked again in the turn.
    FileLock turn;
    if (stop_ || (!fs::is_regular_file(job.copy, ec) && !take_turn(turn))) break;
    enum { copied, skipped, failed } outcome = copied;
    std::string failure;
    try {
      if (fs::is_regular_file(job.copy, ec)) {
        job.shard->use_copy(job.copy.string());
      } else if (folder_bytes(folder_) + job.bytes + job.index_bytes > limit_) {
        outcome = skipped;
      } else {
        copy_remote_shard(job, stop_);
      }
    } catch (const Error& e) {
      outcome = failed;
      failure = e.message();
    } catch (const std::exception& e) {
      outcome = failed;
      failure = e.what();
    }
    if (stop_) break;  // a transfer cut short by the stop is no failure
    std::lock_guard<std::mutex> lock(mutex_);
    if (outcome == copied) ++counts_.copied;
    if (outcome == skipped) ++counts_.skipped;
    if (outcome == failed && counts_.failed++ == 0) counts_.first_failure = failure;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  counts_.finished = true;
}

ShardCopier::Counts ShardCopier::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

std::string ShardCopier::take_news() {
  const Counts now = counts();
  std::string news;
  const auto add = [&](const std::string& part) { news += (news.empty() ? "" : "; ") + part; };
  if (now.copied > reported_.copied)
    add(std::to_string(now.copied - reported_.copied) + " more shard(s) copied into the cache " + folder_.string() +
        " (" + std::to_string(now.copied) + " of the " + std::to_string(jobs_.size()) + " to copy)");
  if (now.failed > reported_.failed)
    add(std::to_string(now.failed - reported_.failed) +
        " shard(s) not copied (read by ranges instead), the first: " + now.first_failure);
  if (!now.lock_problem.empty() && reported_.lock_problem.empty())
    add("the cache's lock file could not be used (" + now.lock_problem +
        "): other processes may copy the same shards at the same time");
  if (now.skipped > reported_.skipped)
    add(std::to_string(now.skipped - reported_.skipped) +
        " shard(s) left out: the cache folder would pass data.shards.cache_mb (" + megabytes(limit_) + ")");
  reported_ = now;
  return news;
}

}  // namespace trainer
