// The two text files beside WebDataset shards that a run reads: a shard's index (DALI's .idx, against a shard of
// 4096 bytes), up to the input's first NUL byte, and shards.json after it.
#include <cstdlib>

#include "fuzz/fuzz_support.hpp"
#include "trainer/data/sources/shard_index.hpp"
#include "trainer/data/sources/shard_summary.hpp"

TRAINER_FUZZ_TARGET(shard_index) {
  const auto parts = trainer::fuzz::split(data, size, '\0', 2);
  trainer::fuzz::refused_cleanly([&] {
    for (const auto& s : trainer::parse_shard_index(parts[0], "fuzz.idx", 4096))
      for (const auto& m : s.members)
        if (m.offset > 4096 || m.size > 4096 - m.offset) std::abort();  // every member inside the shard
  });
  trainer::fuzz::refused_cleanly([&] { trainer::parse_shard_summary(parts.size() > 1 ? parts[1] : "", "shards.json"); });
  return 0;
}
