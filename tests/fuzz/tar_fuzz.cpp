// A WebDataset shard's tar headers (data/sources/tar_members.hpp) as a local shard is first read: the members listed,
// grouped into samples, and the index the trainer would write for them parsed back.
#include <cstdlib>

#include "fuzz/fuzz_support.hpp"
#include "trainer/data/sources/shard_index.hpp"
#include "trainer/data/sources/tar_members.hpp"

TRAINER_FUZZ_TARGET(tar) {
  trainer::fuzz::refused_cleanly([&] {
    const auto members = trainer::list_tar_members(data, size, "fuzz.tar");
    for (const auto& m : members)
      if (m.offset > size || m.size > size - m.offset) std::abort();  // every member inside the bytes
    const auto samples = trainer::group_samples(members);
    trainer::parse_shard_index(trainer::format_shard_index(samples), "fuzz.idx", size);
  });
  return 0;
}
