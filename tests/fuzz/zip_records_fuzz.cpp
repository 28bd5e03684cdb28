// The zip directory walk and CRC-32 check that runs before LibTorch sees a checkpoint or a .pth
// (io/zip_records.hpp). It returns what is damaged; it never throws.
#include "fuzz/fuzz_support.hpp"
#include "trainer/io/zip_records.hpp"

TRAINER_FUZZ_TARGET(zip_records) {
  trainer::first_damaged_record(reinterpret_cast<const char*>(data), size);
  return 0;
}
