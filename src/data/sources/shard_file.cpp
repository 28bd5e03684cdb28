#include "trainer/data/sources/shard_file.hpp"

#include <filesystem>
#include <system_error>

#include "trainer/data/sources/shard_listing.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/http_range.hpp"

namespace trainer {

namespace fs = std::filesystem;

ShardFile::ShardFile(std::string location, std::string local_copy)
    : location_(std::move(location)),
      path_(local_copy.empty() ? location_ : std::move(local_copy)),
      remote_(is_http_address(path_)) {
  if (remote_) return;
  file_ = std::make_unique<PositionalFile>();
  if (const std::error_code ec = file_->open(fs::path(path_)))
    throw DataError(location_ + ": cannot open the shard" + (path_ == location_ ? "" : " (its copy " + path_ + ")") +
                    ": " + ec.message());
}

uint64_t ShardFile::size() const { return file_ ? file_->size() : 0; }

void ShardFile::read(uint64_t offset, uint64_t size, std::vector<uint8_t>& out, bool retry) const {
  if (size == 0) {  // an empty member (a range request of 0 bytes would ask for the whole shard)
    out.clear();
    return;
  }
  if (const PositionalFile* copy = copy_.load(std::memory_order_acquire)) return read_local(*copy, offset, size, out);
  if (!remote_) return read_local(*file_, offset, size, out);
  try {
    HttpOptions options;
    if (!retry) options.attempts = 1;
    http_read(location_, offset, size, out, options);
  } catch (const Error& e) {
    throw DataError(e.message() + " (shard " + location_ + ", offset " + std::to_string(offset) + ")");
  }
}

void ShardFile::read_local(const PositionalFile& file, uint64_t offset, uint64_t size,
                           std::vector<uint8_t>& out) const {
  if (offset > file.size() || size > file.size() - offset)
    throw DataError(location_ + ": offset " + std::to_string(offset) + " (" + std::to_string(size) +
                    " bytes) is past the shard's end at " + std::to_string(file.size()) +
                    " (the shard changed after its index was read)");
  out.resize(size);
  if (const std::error_code ec = file.read_at(offset, size, out.data()))
    throw DataError(location_ + ": cannot read " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                    ": " + ec.message());
}

void ShardFile::use_copy(const std::string& local_copy) const {
  auto file = std::make_unique<PositionalFile>();
  if (const std::error_code ec = file->open(fs::path(local_copy)))
    throw DataError(location_ + ": cannot open its copy " + local_copy + ": " + ec.message());
  if (copy_file_) throw DataError(location_ + ": a second copy " + local_copy);
  copy_file_ = std::move(file);
  copy_.store(copy_file_.get(), std::memory_order_release);
}

std::vector<IndexedSample> ShardFile::read_remote_tar(ReadThrough* through) const {
  const bool listing = through && !through->listings.empty();
  HttpValidators now;  // the shard's version, as a range's answer names it
  if (listing) {
    // The listing an earlier start kept of this version of the shard: one small request instead of the shard's bytes.
    // A shard that does not answer it is read through as before, which says what is wrong.
    try {
      now = http_validators(location_);
    } catch (const Error&) {
    }
    if (now.known())
      if (auto kept = read_shard_listing(shard_listing_path(through->listings, location_, now), location_, now.size)) {
        through->listed = true;
        through->kept = std::move(kept->kept);
        return std::move(kept->samples);
      }
  }
  TarMemberStream tar(location_, through ? through->keep_suffix : "", 4096);
  HttpValidators read;  // of the version read through
  try {
    http_stream(
        location_,
        [&](const uint8_t* data, size_t size) {
          tar.feed(data, size);
          return !tar.done();  // the end blocks: the rest is padding
        },
        {}, &read);
  } catch (const DataError&) {
    throw;
  } catch (const Error& e) {
    throw DataError(e.message() + " (a shard without an index is read through once to list its samples)");
  }
  std::vector<IndexedSample> samples = group_samples(tar.finish());
  if (through) {
    through->happened = true;
    through->kept = tar.kept();
  }
  // Named by the same kind of answer a later start asks for (a range's), when the read was of that version.
  if (listing && now.known() && !now.contradicts(read))
    write_shard_listing(shard_listing_path(through->listings, location_, now), samples, through->kept);
  return samples;
}

std::vector<IndexedSample> ShardFile::samples(bool write_index, ReadThrough* through) const {
  const std::string index = shard_index_location(path_);
  std::vector<uint8_t> text;
  if (remote_) {
    try {
      http_read(index, 0, 0, text);
    } catch (const HttpStatusError& e) {
      // No index (S3 answers 403 for a missing object that the reader may not list).
      if (e.status() != 404 && e.status() != 403 && e.status() != 410) throw DataError(e.message());
      return read_remote_tar(through);
    } catch (const Error& e) {
      throw DataError(e.message());
    }
    return parse_shard_index(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), index, 0);
  }
  std::error_code ec;
  if (fs::exists(fs::path(index), ec)) {
    if (const std::error_code read = read_file(fs::path(index), text))
      throw DataError(index + ": cannot read the shard's index: " + read.message());
    return parse_shard_index(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), index, size());
  }
  MappedFile mapped;
  if (const std::error_code ec = mapped.open(fs::path(path_)))
    throw DataError(location_ + ": cannot read the shard: " + ec.message());
  std::vector<IndexedSample> samples =
      group_samples(list_tar_members(reinterpret_cast<const uint8_t*>(mapped.data()), mapped.size(), location_));
  if (write_index) write_shard_index_beside(path_, format_shard_index(samples));
  return samples;
}

}  // namespace trainer
