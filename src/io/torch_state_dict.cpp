#include "trainer/io/torch_state_dict.hpp"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/torch.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "trainer/io/zip_records.hpp"
#include "trainer/platform/files.hpp"
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

// A storage's element type from its pickled class name (torch.FloatStorage and its kin).
const std::map<std::string, torch::Dtype>& storage_types() {
  static const std::map<std::string, torch::Dtype> types{
      {"torch.FloatStorage", torch::kFloat}, {"torch.DoubleStorage", torch::kDouble},
      {"torch.HalfStorage", torch::kHalf},   {"torch.BFloat16Storage", torch::kBFloat16},
      {"torch.LongStorage", torch::kLong},   {"torch.IntStorage", torch::kInt},
      {"torch.ShortStorage", torch::kShort}, {"torch.CharStorage", torch::kChar},
      {"torch.ByteStorage", torch::kByte},   {"torch.BoolStorage", torch::kBool}};
  return types;
}

// The callables a state dict's pickle may name; each is applied by Unpickler::reduce, never looked up elsewhere.
enum class Callable { ordered_dict, rebuild_tensor, rebuild_parameter };
const std::map<std::string, Callable>& callables() {
  static const std::map<std::string, Callable> known{{"collections.OrderedDict", Callable::ordered_dict},
                                                     {"torch._utils._rebuild_tensor_v2", Callable::rebuild_tensor},
                                                     {"torch._utils._rebuild_parameter", Callable::rebuild_parameter}};
  return known;
}

struct Value;
using ValuePtr = std::shared_ptr<Value>;

// One pickled value. Lists and dicts are shared (the pickle's memo refers to them, and APPENDS/SETITEMS change
// them in place).
struct Value {
  enum class Kind { none, boolean, integer, real, text, tuple, list, dict, tensor, storage_class, callable, mark };
  Kind kind = Kind::none;
  int64_t integer = 0;
  double real = 0;
  std::string text;                                    // text; a storage class's or callable's name
  std::vector<ValuePtr> items;                         // tuple, list
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // dict, in insertion order
  torch::Tensor tensor;                                // tensor; a storage's flat contents
  Callable callable = Callable::ordered_dict;
};

ValuePtr make(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

class Unpickler {
 public:
  Unpickler(const std::string& file, const std::string& pickle, caffe2::serialize::PyTorchStreamReader& archive)
      : file_(file), p_(pickle), archive_(archive) {}

  ValuePtr run() {
    for (;;) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80: byte(); break;   // PROTO
        case 0x95: take(8); break;  // FRAME
        case '.': return pop();     // STOP
        case '(': push(make(Value::Kind::mark)); break;
        case 'N': push(make(Value::Kind::none)); break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          auto v = make(Value::Kind::boolean);
          v->integer = op == 0x88;
          push(v);
          break;
        }
        case 'J': push_integer(static_cast<int32_t>(little(4))); break;  // BININT
        case 'K': push_integer(static_cast<int64_t>(little(1))); break;  // BININT1
        case 'M': push_integer(static_cast<int64_t>(little(2))); break;  // BININT2
        case 0x8a: {                                                     // LONG1
          const size_t n = byte();
          if (n > 8) fail("an integer wider than 64 bits");
          uint64_t u = n ? little(n) : 0;
          if (n && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t{0} << (8 * n);  // sign-extend
          push_integer(static_cast<int64_t>(u));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = bits << 8 | byte();
          auto v = make(Value::Kind::real);
          std::memcpy(&v->real, &bits, 8);
          push(v);
          break;
        }
        case 'X': push_text(take(little(4))); break;      // BINUNICODE
        case 0x8c: push_text(take(byte())); break;        // SHORT_BINUNICODE
        case 'T': push_text(take(little(4))); break;      // BINSTRING
        case 'U': push_text(take(byte())); break;         // SHORT_BINSTRING
        case ')': push(make(Value::Kind::tuple)); break;  // EMPTY_TUPLE
        case ']': push(make(Value::Kind::list)); break;   // EMPTY_LIST
        case '}': push(make(Value::Kind::dict)); break;   // EMPTY_DICT
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
          auto v = make(Value::Kind::tuple);
          v->items.resize(op - 0x84);
          for (size_t i = v->items.size(); i-- > 0;) v->items[i] = pop();
          push(v);
          break;
        }
        case 't':
        case 'l': {  // TUPLE, LIST from the mark
          auto v = make(op == 't' ? Value::Kind::tuple : Value::Kind::list);
          v->items = pop_to_mark();
          push(v);
          break;
        }
        case 'd': {  // DICT from the mark
          auto v = make(Value::Kind::dict);
          set_items(*v, pop_to_mark());
          push(v);
          break;
        }
        case 'a': {  // APPEND
          auto item = pop();
          list_on_top().items.push_back(item);
          break;
        }
        case 'e': {  // APPENDS
          auto items = pop_to_mark();
          auto& list = list_on_top();
          list.items.insert(list.items.end(), items.begin(), items.end());
          break;
        }
        case 's': {  // SETITEM
          auto value = pop(), key = pop();
          dict_on_top().entries.emplace_back(key, value);
          break;
        }
        case 'u': {  // SETITEMS
          auto items = pop_to_mark();
          set_items(dict_on_top(), items);
          break;
        }
        case 'q': memo_[little(1)] = top(); break;      // BINPUT
        case 'r': memo_[little(4)] = top(); break;      // LONG_BINPUT
        case 0x94: memo_[memo_.size()] = top(); break;  // MEMOIZE
        case 'h': push(memo(little(1))); break;         // BINGET
        case 'j': push(memo(little(4))); break;         // LONG_BINGET
        case 'c': {                                     // GLOBAL "module\nname\n"
          const std::string module = line(), name = line();
          push(global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          auto name = pop(), module = pop();
          if (name->kind != Value::Kind::text || module->kind != Value::Kind::text) fail("a malformed class name");
          push(global(module->text, name->text));
          break;
        }
        case 'R': {  // REDUCE: callable(*args)
          auto args = pop(), callable = pop();
          push(reduce(*callable, *args));
          break;
        }
        case 'b': {  // BUILD: the object's state (OrderedDict's _metadata, the module versions): not needed
          pop();
          break;
        }
        case 'Q': push(persistent_load(*pop())); break;  // BINPERSID
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("an unsupported pickle instruction ") + hex);
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw WeightsError(file_ + ": " + what + " in data.pkl, which a state dict does not hold");
  }

  uint8_t byte() {
    if (at_ >= p_.size()) throw WeightsError(file_ + ": data.pkl ends early (truncated or damaged)");
    return static_cast<uint8_t>(p_[at_++]);
  }
  uint64_t little(size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{byte()} << (8 * i);
    return v;
  }
  std::string take(uint64_t n) {
    if (n > p_.size() - at_) throw WeightsError(file_ + ": data.pkl ends early (truncated or damaged)");
    std::string s = p_.substr(at_, n);
    at_ += n;
    return s;
  }
  std::string line() {
    const size_t end = p_.find('\n', at_);
    if (end == std::string::npos) throw WeightsError(file_ + ": data.pkl ends early (truncated or damaged)");
    std::string s = p_.substr(at_, end - at_);
    at_ = end + 1;
    return s;
  }

  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  void push_integer(int64_t i) {
    auto v = make(Value::Kind::integer);
    v->integer = i;
    push(v);
  }
  void push_text(std::string s) {
    auto v = make(Value::Kind::text);
    v->text = std::move(s);
    push(v);
  }
  ValuePtr pop() {
    if (stack_.empty()) fail("a malformed pickle (empty stack)");
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  const ValuePtr& top() {
    if (stack_.empty()) fail("a malformed pickle (empty stack)");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_to_mark() {
    std::vector<ValuePtr> items;
    for (;;) {
      auto v = pop();
      if (v->kind == Value::Kind::mark) break;
      items.push_back(v);
    }
    return {items.rbegin(), items.rend()};
  }
  Value& list_on_top() {
    if (top()->kind != Value::Kind::list) fail("an append to something other than a list");
    return *top();
  }
  Value& dict_on_top() {
    if (top()->kind != Value::Kind::dict) fail("an item set on something other than a dict");
    return *top();
  }
  void set_items(Value& dict, const std::vector<ValuePtr>& flat) {
    if (flat.size() % 2) fail("a dict with a key and no value");
    for (size_t i = 0; i < flat.size(); i += 2) dict.entries.emplace_back(flat[i], flat[i + 1]);
  }
  ValuePtr memo(uint64_t key) {
    const auto it = memo_.find(key);
    if (it == memo_.end()) fail("a reference to an unknown memo entry");
    return it->second;
  }

  // The only classes and functions a state dict names. Anything else (argparse.Namespace in a training
  // script's checkpoint, a model class pickled whole, or something made to run code) is refused here.
  ValuePtr global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    if (storage_types().count(full)) {
      auto v = make(Value::Kind::storage_class);
      v->text = full;
      return v;
    }
    const auto it = callables().find(full);
    if (it == callables().end())
      throw WeightsError(file_ + ": holds a Python object of class " + full +
                         ", which is not read (only tensors, dicts, lists, numbers and strings are, and nothing in "
                         "the file is run); save the state dict alone: torch.save(model.state_dict(), path)");
    auto v = make(Value::Kind::callable);
    v->text = full;
    v->callable = it->second;
    return v;
  }

  static std::vector<int64_t> integers(const Value& tuple) {
    std::vector<int64_t> out;
    for (const auto& item : tuple.items) out.push_back(item->integer);
    return out;
  }

  ValuePtr reduce(const Value& callable, const Value& args) {
    if (callable.kind != Value::Kind::callable || args.kind != Value::Kind::tuple)
      fail("a call of something other than a known function");
    const auto& a = args.items;
    switch (callable.callable) {
      case Callable::ordered_dict:
        if (!a.empty()) fail("an OrderedDict made from arguments");
        return make(Value::Kind::dict);
      case Callable::rebuild_parameter:
        if (a.empty() || a[0]->kind != Value::Kind::tensor) fail("a parameter without a tensor");
        return a[0];
      case Callable::rebuild_tensor: {
        // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
        if (a.size() < 4 || a[0]->kind != Value::Kind::tensor || a[1]->kind != Value::Kind::integer ||
            a[2]->kind != Value::Kind::tuple || a[3]->kind != Value::Kind::tuple)
          fail("a tensor with malformed arguments");
        const torch::Tensor& storage = a[0]->tensor;
        const int64_t offset = a[1]->integer;
        const auto size = integers(*a[2]), stride = integers(*a[3]);
        if (size.size() != stride.size()) fail("a tensor whose size and stride differ in length");
        int64_t last = offset, count = 1;
        for (size_t i = 0; i < size.size(); ++i) {
          if (size[i] < 0 || stride[i] < 0) fail("a tensor with a negative size or stride");
          count *= size[i];
          last += (size[i] - 1) * stride[i];
        }
        if (offset < 0 || (count > 0 && last >= storage.numel()))
          throw WeightsError(file_ + ": a tensor reaches past the end of its storage (damaged file)");
        auto v = make(Value::Kind::tensor);
        v->tensor = storage.as_strided(size, stride, offset);
        return v;
      }
    }
    fail("an unknown call");
  }

  // ('storage', storage class, key, location, numel): the storage's bytes are the archive's record data/KEY.
  ValuePtr persistent_load(const Value& id) {
    if (id.kind != Value::Kind::tuple || id.items.size() < 5 || id.items[0]->text != "storage" ||
        id.items[1]->kind != Value::Kind::storage_class || id.items[2]->kind != Value::Kind::text ||
        id.items[4]->kind != Value::Kind::integer)
      fail("a reference to something other than a tensor storage");
    const std::string& key = id.items[2]->text;
    if (auto cached = storages_.find(key); cached != storages_.end()) return cached->second;
    const torch::Dtype dtype = storage_types().at(id.items[1]->text);
    const int64_t numel = id.items[4]->integer;
    const std::string record = "data/" + key;
    if (!archive_.hasRecord(record)) throw WeightsError(file_ + ": storage " + record + " is missing (damaged file)");
    auto [data, bytes] = archive_.getRecord(record);
    auto v = make(Value::Kind::tensor);
    v->tensor = torch::empty({numel}, torch::TensorOptions().dtype(dtype));
    if (numel < 0 || bytes != v->tensor.nbytes())
      throw WeightsError(file_ + ": storage " + record + " holds " + std::to_string(bytes) + " bytes, not the " +
                         std::to_string(v->tensor.nbytes()) + " its tensors need (damaged file)");
    std::memcpy(v->tensor.data_ptr(), data.get(), bytes);
    storages_[key] = v;
    return v;
  }

  std::string file_;
  const std::string& p_;
  size_t at_ = 0;
  caffe2::serialize::PyTorchStreamReader& archive_;
  std::vector<ValuePtr> stack_;
  std::map<uint64_t, ValuePtr> memo_;
  std::map<std::string, ValuePtr> storages_;
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
  const std::string file = path.string();
  std::vector<uint8_t> bytes;
  if (const auto ec = read_file(path, bytes)) throw WeightsError(file + ": cannot read (" + ec.message() + ")");
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
  const ValuePtr top = Unpickler(file, pickle, *archive).run();
  if (top->kind != Value::Kind::dict)
    throw WeightsError(file + ": holds no state dict (its top level is not a dict of tensors)");
  NamedTensors tensors;
  for (const auto& [key, value] : top->entries) {
    if (key->kind != Value::Kind::text || value->kind != Value::Kind::tensor)
      throw WeightsError(
          file + ": holds no plain state dict (" +
          (key->kind == Value::Kind::text ? "\"" + key->text + "\" is not a tensor" : "a key is not text") +
          "); save the state dict alone: torch.save(model.state_dict(), path)");
    tensors.emplace_back(key->text, value->tensor.contiguous());
  }
  return tensors;
}

}  // namespace trainer
