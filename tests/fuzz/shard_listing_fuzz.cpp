// A remote shard's listing as a later start reads it from the cache folder (data/sources/shard_listing.hpp), against
// a shard of 65536 bytes: a file that fails a check is not used (no error at all: the shard is then read through);
// one that is used lists members inside the shard and keeps only members it lists, at most 4096 bytes each.
#include <cstdlib>
#include <map>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "trainer/data/sources/shard_listing.hpp"

TRAINER_FUZZ_TARGET(shard_listing) {
  constexpr uint64_t kShard = 65536;
  const auto path =
      trainer::fuzz::scratch().write("fuzz.listing", std::string(reinterpret_cast<const char*>(data), size));
  const auto listing = trainer::read_shard_listing(path, "http://host/fuzz.tar", kShard);
  if (!listing) return 0;
  std::map<uint64_t, uint64_t> listed;
  for (const auto& s : listing->samples)
    for (const auto& m : s.members) {
      if (m.offset > kShard || m.size > kShard - m.offset) std::abort();  // every member inside the shard
      listed[m.offset] = m.size;
    }
  for (const auto& [offset, bytes] : listing->kept) {
    const auto it = listed.find(offset);
    if (it == listed.end() || it->second != bytes.size() || bytes.size() > 4096) std::abort();
  }
  return 0;
}
