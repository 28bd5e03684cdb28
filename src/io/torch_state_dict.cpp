#include "trainer/io/torch_state_dict.hpp"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/torch.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "trainer/io/state_dict_pickle.hpp"
#include "trainer/io/zip_records.hpp"
#include "trainer/platform/files.hpp"
#include "trainer/util/checked_math.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

// The zip archive from bytes already in memory (read once, through the platform layer, and CRC-checked).
class BytesAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BytesAdapter(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::vector<uint8_t>& bytes_;
};

}  // namespace

bool is_legacy_torch_file(const std::vector<uint8_t>& head) {
  // pickle PROTO 2, then LONG1 of the 10-byte magic number 0x1950a86a20f9469cfc6c.
  static constexpr uint8_t magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                      0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  if (head.size() >= sizeof magic && std::memcmp(head.data(), magic, sizeof magic) == 0) return true;
  // The oldest format, a tar of sys_info, pickle, storages and tensors (torchvision's first ResNet files,
  // resnet18-5c106cde.pth among them): a tar header, "ustar" at offset 257.
  return head.size() >= 262 && std::memcmp(head.data() + 257, "ustar", 5) == 0;
}

bool is_torch_zip_file(const std::vector<uint8_t>& head) {
  return head.size() >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4;
}

NamedTensors read_torch_state_dict(const std::filesystem::path& path) {
  std::vector<uint8_t> bytes;
  if (const auto ec = read_file(path, bytes))
    throw WeightsError(path.string() + ": cannot read (" + ec.message() + ")");
  return torch_state_dict_from_bytes(path.string(), bytes);
}

NamedTensors torch_state_dict_from_bytes(const std::string& file, const std::vector<uint8_t>& bytes) {
  if (is_legacy_torch_file(bytes))
    throw WeightsError(file +
                       ": PyTorch's legacy format (torch.save before 1.6, or with "
                       "_use_new_zipfile_serialization=False), which is not read; re-save it in Python: "
                       "torch.save(torch.load(path), path)");
  if (bytes.size() < 0xFFFFFFFFull)
    if (const auto damaged = first_damaged_record(reinterpret_cast<const char*>(bytes.data()), bytes.size()))
      throw WeightsError(file + ": truncated or damaged (" + *damaged + ")");
  std::string pickle;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> archive;
  try {
    archive = std::make_unique<caffe2::serialize::PyTorchStreamReader>(std::make_shared<BytesAdapter>(bytes));
    if (!archive->hasRecord("data.pkl")) throw WeightsError(file + ": a zip file without data.pkl, not torch.save's");
    auto [data, size] = archive->getRecord("data.pkl");
    pickle.assign(static_cast<const char*>(data.get()), size);
  } catch (const c10::Error& e) {
    throw WeightsError(file + ": truncated or damaged (" + first_line(e.what_without_backtrace()) + ")");
  }
  const auto storage = [&](const std::string& key, torch::Dtype dtype, int64_t numel) {
    const std::string record = "data/" + key;
    if (!archive->hasRecord(record)) throw WeightsError(file + ": storage " + record + " is missing (damaged file)");
    // The record (no larger than the file, already in memory) against the element count before the tensor is
    // allocated: a hostile count must not reserve memory.
    auto [data, bytes] = archive->getRecord(record);
    uint64_t needed = 0;
    const auto element = static_cast<uint64_t>(c10::elementSize(dtype));
    if (numel < 0 || multiply_overflows(static_cast<uint64_t>(numel), element, needed) || needed != bytes)
      throw WeightsError(file + ": storage " + record + " holds " + std::to_string(bytes) + " bytes, not the " +
                         (numel < 0 ? std::string("negative count of")
                                    : std::to_string(numel) + " x " + std::to_string(element) + " bytes of") +
                         " elements its tensors need (damaged file)");
    torch::Tensor t = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
    std::memcpy(t.data_ptr(), data.get(), bytes);
    return t;
  };
  PickleValuePtr top;
  try {
    top = unpickle_state_dict(file, pickle, storage);
  } catch (const c10::Error& e) {  // the zip reader refusing a storage record (encrypted, compressed oddly, ...)
    throw WeightsError(file + ": truncated or damaged (" + first_line(e.what_without_backtrace()) + ")");
  }
  if (top->kind != PickleValue::Kind::dict)
    throw WeightsError(file + ": holds no state dict (its top level is not a dict of tensors)");
  NamedTensors tensors;
  for (const auto& [key, value] : top->entries) {
    if (key->kind != PickleValue::Kind::text || value->kind != PickleValue::Kind::tensor)
      throw WeightsError(
          file + ": holds no plain state dict (" +
          (key->kind == PickleValue::Kind::text ? "\"" + key->text + "\" is not a tensor" : "a key is not text") +
          "); save the state dict alone: torch.save(model.state_dict(), path)");
    tensors.emplace_back(key->text, value->tensor.contiguous());
  }
  return tensors;
}

}  // namespace trainer
