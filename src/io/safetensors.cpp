#include "trainer/io/safetensors.hpp"

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <optional>
#include <set>

#include "trainer/config/json_text.hpp"
#include "trainer/util/atomic_file.hpp"
#include "trainer/util/checked_math.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace fs = std::filesystem;
using nlohmann::json;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian; so must the host be");

namespace {

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
  uint64_t size;
};

// The dtypes LibTorch can hold; unsigned 16/32/64-bit and float8 are refused by name.
constexpr std::array<DtypeInfo, 10> kDtypes{{{"F64", torch::kDouble, 8},
                                             {"F32", torch::kFloat, 4},
                                             {"F16", torch::kHalf, 2},
                                             {"BF16", torch::kBFloat16, 2},
                                             {"I64", torch::kLong, 8},
                                             {"I32", torch::kInt, 4},
                                             {"I16", torch::kShort, 2},
                                             {"I8", torch::kChar, 1},
                                             {"U8", torch::kByte, 1},
                                             {"BOOL", torch::kBool, 1}}};

const DtypeInfo* dtype_by_name(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const DtypeInfo* dtype_by_type(torch::ScalarType type) {
  for (const auto& d : kDtypes)
    if (type == d.type) return &d;
  return nullptr;
}

std::string known_dtypes() {
  std::string s;
  for (const auto& d : kDtypes) s += std::string(s.empty() ? "" : ", ") + d.name;
  return s;
}

struct Entry {
  std::string name;
  const DtypeInfo* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

uint64_t read_u64_le(const unsigned char* b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

// A JSON value that is a non-negative integer, or nullopt (negative, fractional, too large, not a number).
std::optional<uint64_t> as_unsigned(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

Entry parse_entry(const std::string& where, const std::string& name, const json& v, uint64_t data_size) {
  const std::string at = where + ": tensor \"" + name + "\": ";
  if (!v.is_object()) throw WeightsError(at + "expected an object with dtype, shape and data_offsets");
  Entry e;
  e.name = name;
  if (!v.contains("dtype") || !v["dtype"].is_string()) throw WeightsError(at + "missing or non-string \"dtype\"");
  e.dtype = dtype_by_name(v["dtype"].get<std::string>());
  if (!e.dtype)
    throw WeightsError(at + "unsupported dtype \"" + v["dtype"].get<std::string>() +
                       "\" (supported: " + known_dtypes() + ")");
  if (!v.contains("shape") || !v["shape"].is_array()) throw WeightsError(at + "missing or non-array \"shape\"");
  uint64_t elements = 1;
  for (const auto& d : v["shape"]) {
    const auto dim = as_unsigned(d);
    if (!dim || *dim > static_cast<uint64_t>(INT64_MAX))
      throw WeightsError(at + "shape " + v["shape"].dump() + " holds a value that is not a size");
    if (multiply_overflows(elements, *dim, elements))
      throw WeightsError(at + "shape " + v["shape"].dump() + " overflows");
    e.shape.push_back(static_cast<int64_t>(*dim));
  }
  if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
    throw WeightsError(at + "expected \"data_offsets\": [begin, end]");
  const auto begin = as_unsigned(v["data_offsets"][0]), end = as_unsigned(v["data_offsets"][1]);
  if (!begin || !end || *begin > *end)
    throw WeightsError(at + "data_offsets " + v["data_offsets"].dump() + " is not a range [begin, end]");
  if (*end > data_size)
    throw WeightsError(at + "data_offsets " + v["data_offsets"].dump() + " run past the data area (" +
                       std::to_string(data_size) + " bytes)");
  uint64_t bytes = 0;
  if (multiply_overflows(elements, e.dtype->size, bytes) || bytes != *end - *begin)
    throw WeightsError(at + "data_offsets " + v["data_offsets"].dump() + " span " + std::to_string(*end - *begin) +
                       " bytes but shape " + v["shape"].dump() + " of " + e.dtype->name + " needs " +
                       std::to_string(elements) + " x " + std::to_string(e.dtype->size));
  e.begin = *begin;
  e.end = *end;
  return e;
}

}  // namespace

TensorFile read_safetensors(const fs::path& path) {
  const std::string where = path.string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw WeightsError(where + ": no such file");
  const uint64_t file_size = fs::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) throw WeightsError(where + ": cannot open");
  if (file_size < 8)
    throw WeightsError(where + ": " + std::to_string(file_size) + " bytes, too short for a safetensors header");
  std::array<unsigned char, 8> length_bytes{};
  in.read(reinterpret_cast<char*>(length_bytes.data()), 8);
  const uint64_t header_size = read_u64_le(length_bytes.data());
  if (header_size > kMaxSafetensorsHeaderBytes)
    throw WeightsError(where + ": header length " + std::to_string(header_size) + " exceeds the limit of " +
                       std::to_string(kMaxSafetensorsHeaderBytes) + " bytes (not a safetensors file?)");
  if (header_size > file_size - 8)
    throw WeightsError(where + ": header length " + std::to_string(header_size) + " runs past the end of the file (" +
                       std::to_string(file_size) + " bytes; truncated?)");
  std::string text(header_size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_size));
  if (static_cast<uint64_t>(in.gcount()) != header_size) throw WeightsError(where + ": read failed in the header");

  // nlohmann keeps the last of repeated keys silently; a repeated tensor name is a damaged file.
  std::set<std::string> seen;
  std::string repeated;
  const json::parser_callback_t on_key = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second &&
        repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = parse_json(text, on_key);
  } catch (const json::exception& e) {  // a parse error, or a number out of range (1e999)
    throw WeightsError(where + ": header is not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!header.is_object()) throw WeightsError(where + ": header is not a JSON object");
  if (!repeated.empty()) throw WeightsError(where + ": tensor \"" + repeated + "\" appears twice in the header");

  const uint64_t data_start = 8 + header_size, data_size = file_size - data_start;
  TensorFile file;
  std::vector<Entry> entries;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") {
      if (!item.value().is_object()) throw WeightsError(where + ": __metadata__ is not an object");
      for (const auto& m : item.value().items()) {
        if (!m.value().is_string())
          throw WeightsError(where + ": __metadata__." + m.key() + " is not a string (safetensors metadata is text)");
        file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(where, item.key(), item.value(), data_size));
  }

  std::vector<const Entry*> by_offset;
  for (const auto& e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      throw WeightsError(where + ": tensors \"" + by_offset[i - 1]->name + "\" and \"" + by_offset[i]->name +
                         "\" overlap in the data area");

  for (const auto& e : entries) {  // header.items() is in name order
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype->type));
    const uint64_t bytes = e.end - e.begin;
    in.seekg(static_cast<std::streamoff>(data_start + e.begin));
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(bytes));
    if (!in || static_cast<uint64_t>(in.gcount()) != bytes)
      throw WeightsError(where + ": tensor \"" + e.name + "\": read failed");
    file.tensors.emplace_back(e.name, std::move(t));
  }
  return file;
}

std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata,
                              const std::string& source) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> data;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__" || header.contains(name))
      throw WeightsError(source + ": tensor name \"" + name + "\" is reserved or repeated");
    const DtypeInfo* dtype = dtype_by_type(tensor.scalar_type());
    if (!dtype)
      throw WeightsError(source + ": tensor \"" + name + "\" has dtype " +
                         std::string(c10::toString(tensor.scalar_type())) + ", which safetensors cannot hold");
    torch::Tensor row_major = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(row_major.numel()) * dtype->size;
    header[name] = {
        {"dtype", dtype->name}, {"shape", row_major.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(row_major));
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // pad with spaces so the data area starts 8-byte aligned
  std::string out;
  out.reserve(8 + text.size() + offset);
  for (size_t i = 0; i < 8; ++i) out.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  out += text;
  for (const auto& t : data)
    out.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()) * t.element_size());
  return out;
}

void write_safetensors(const fs::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string bytes = safetensors_bytes(tensors, metadata, path.string());
  write_file_atomically(path, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

}  // namespace trainer
