// A WebDataset shard's tar headers (data/sources/tar_members.hpp) as a local shard is first read: the members listed,
// grouped into samples, and the index the trainer would write for them parsed back; and as a remote shard without
// an index is read, in pieces (sizes drawn from the input), which must list the same members or refuse with the
// same error.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "trainer/data/sources/shard_index.hpp"
#include "trainer/data/sources/tar_members.hpp"

namespace {

// The members, or the error's message.
template <class List>
std::string outcome(List&& list) {
  try {
    std::string out;
    for (const auto& m : list()) out += m.name + " " + std::to_string(m.offset) + " " + std::to_string(m.size) + "\n";
    return out;
  } catch (const trainer::Error& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

TRAINER_FUZZ_TARGET(tar) {
  trainer::fuzz::refused_cleanly([&] {
    const auto members = trainer::list_tar_members(data, size, "fuzz.tar");
    for (const auto& m : members)
      if (m.offset > size || m.size > size - m.offset) std::abort();  // every member inside the bytes
    const auto samples = trainer::group_samples(members);
    trainer::parse_shard_index(trainer::format_shard_index(samples), "fuzz.idx", size);
  });
  const std::string whole = outcome([&] { return trainer::list_tar_members(data, size, "fuzz.tar"); });
  const std::string pieces = outcome([&] {
    trainer::TarMemberStream stream("fuzz.tar");
    const size_t step = size > 0 ? 1 + data[size - 1] % 700 : 1;  // across header and record boundaries
    for (size_t at = 0; at < size && !stream.done(); at += step) stream.feed(data + at, std::min(step, size - at));
    return stream.finish();
  });
  if (whole != pieces) std::abort();
  return 0;
}
