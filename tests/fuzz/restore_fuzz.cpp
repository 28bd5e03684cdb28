// What --resume and eval restore from a checkpoint that opens: its saved config, the model's and the EMA weights,
// the optimizer's state (tensors in a pickle that LibTorch reads) and the generators' states. The checkpoint target
// reaches these only when a mutation keeps a whole run's archive intact; here each input is a list of byte edits to
// a small real checkpoint (small_checkpoint), 5 bytes each: a 32-bit position among the bytes of its records other
// than the weights (the pickles, the metadata, the version, the generator states), then the byte to put there. The
// CRC-32s are then made to match, so that every input is an archive LibTorch opens, damaged where the fuzzer chose.
#include <cstring>

#include "fuzz/fuzz_support.hpp"
#include "trainer/io/zip_records.hpp"

namespace {

struct Skeleton {
  std::string bytes;
  std::vector<size_t> editable;  // positions in `bytes` that edits address, in order
};

// A record larger than this holding a tensor is a weight: an edit there changes a number and nothing else.
constexpr size_t kLargestStateTensor = 4096;

Skeleton make_skeleton() {
  Skeleton s{trainer::fuzz::small_checkpoint(), {}};
  for (const auto& record : trainer::zip_records(s.bytes.data(), s.bytes.size())) {
    if (trainer::is_tensor_data_record(record.name) && record.bytes.size() > kLargestStateTensor) continue;
    const size_t begin = static_cast<size_t>(record.bytes.data() - s.bytes.data());
    for (size_t i = 0; i < record.bytes.size(); ++i) s.editable.push_back(begin + i);
  }
  return s;
}

}  // namespace

TRAINER_FUZZ_TARGET(restore) {
  static const Skeleton skeleton = make_skeleton();
  if (skeleton.editable.empty()) return 0;
  std::string bytes = skeleton.bytes;
  for (size_t at = 0; at + 5 <= size; at += 5) {
    uint32_t position = 0;
    std::memcpy(&position, data + at, 4);
    bytes[skeleton.editable[position % skeleton.editable.size()]] = static_cast<char>(data[at + 4]);
  }
  const auto crafted =
      trainer::fuzz::with_matching_crcs(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  trainer::fuzz::restore_everything(trainer::fuzz::scratch().write("last.pt", {crafted.begin(), crafted.end()}));
  return 0;
}
