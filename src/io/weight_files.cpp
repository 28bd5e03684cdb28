#include "trainer/io/weight_files.hpp"

#include <fstream>
#include <string>
#include <vector>

#include "trainer/io/torch_state_dict.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

// safetensors: an 8-byte little-endian header length, then the JSON header's '{'.
bool is_safetensors_file(const std::vector<uint8_t>& head) {
  if (head.size() < 9 || head[8] != '{') return false;
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | head[static_cast<size_t>(i)];
  return length <= kMaxSafetensorsHeaderBytes;
}

struct WeightFormat {
  bool (*recognise)(const std::vector<uint8_t>& head);
  NamedTensors (*read)(const std::filesystem::path& path);
};

const WeightFormat kFormats[] = {
    {is_safetensors_file, [](const std::filesystem::path& p) { return read_safetensors(p).tensors; }},
    {is_torch_zip_file, read_torch_state_dict},
    {is_legacy_torch_file, read_torch_state_dict},  // refused there, with how to re-save it
};

}  // namespace

NamedTensors read_weights_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw WeightsError(path.string() + ": no such file");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> head(512);
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  for (const auto& format : kFormats)
    if (format.recognise(head)) return format.read(path);
  throw WeightsError(path.string() +
                     ": not a weights file this trainer reads (safetensors, or PyTorch's torch.save zip: .pth, .bin)");
}

}  // namespace trainer
