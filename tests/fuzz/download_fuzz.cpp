// The way from a weights address to a file in the hub cache (io/weights_hub.hpp, io/download.hpp): whether a spec
// is an address, the file name it ends in, the SHA-256 prefix that name carries, and the partial file's name.
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/download.hpp"
#include "trainer/io/weights_hub.hpp"

TRAINER_FUZZ_TARGET(download) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  trainer::is_address(spec);
  trainer::hub_hash_prefix(spec);
  trainer::fuzz::refused_cleanly([&] {
    const std::string name = trainer::address_file_name(spec);
    trainer::hub_hash_prefix(name);
    trainer::partial_path(trainer::fuzz::scratch().path() / name);
  });
  return 0;
}
