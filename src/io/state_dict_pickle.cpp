#include "trainer/io/state_dict_pickle.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "trainer/util/checked_math.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace {

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

// Their pickled names.
const std::map<std::string, PickleCallable>& callables() {
  static const std::map<std::string, PickleCallable> known{
      {"collections.OrderedDict", PickleCallable::ordered_dict},
      {"torch._utils._rebuild_tensor_v2", PickleCallable::rebuild_tensor},
      {"torch._utils._rebuild_parameter", PickleCallable::rebuild_parameter}};
  return known;
}

// The pickle instructions a state dict is written with (Python's pickle protocol 2-4, Lib/pickle.py's names).
enum class Op : uint8_t {
  kProto = 0x80,
  kFrame = 0x95,
  kStop = '.',
  kMark = '(',
  kNone = 'N',
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kLong1 = 0x8a,
  kBinFloat = 'G',
  kBinUnicode = 'X',
  kShortBinUnicode = 0x8c,
  kBinString = 'T',
  kShortBinString = 'U',
  kEmptyTuple = ')',
  kEmptyList = ']',
  kEmptyDict = '}',
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kTuple = 't',
  kList = 'l',
  kDict = 'd',
  kAppend = 'a',
  kAppends = 'e',
  kSetItem = 's',
  kSetItems = 'u',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kMemoize = 0x94,
  kBinGet = 'h',
  kLongBinGet = 'j',
  kGlobal = 'c',
  kStackGlobal = 0x93,
  kReduce = 'R',
  kBuild = 'b',
  kBinPersId = 'Q',
};

// Bounds no state dict comes near (ResNet-152's holds about 15,000 values, nested 3 deep), so that a hostile
// pickle cannot make the reader hold gigabytes of values or destroy a chain deep enough to overflow the stack.
constexpr size_t kMaxValues = size_t{1} << 20;
constexpr uint32_t kMaxNesting = 64;
constexpr size_t kMaxTensorDims = 64;

bool is_container(const PickleValue& v) {
  return v.kind == PickleValue::Kind::tuple || v.kind == PickleValue::Kind::list || v.kind == PickleValue::Kind::dict;
}

class Unpickler {
 public:
  Unpickler(const std::string& file, const std::string& pickle, const StorageLoader& load_storage)
      : file_(file), p_(pickle), load_storage_(load_storage) {}

  PickleValuePtr run() {
    for (;;) {
      const uint8_t op = byte();
      switch (static_cast<Op>(op)) {
        case Op::kProto: byte(); break;
        case Op::kFrame: take(8); break;
        case Op::kStop: return pop();
        case Op::kMark: push(make(PickleValue::Kind::mark)); break;
        case Op::kNone: push(make(PickleValue::Kind::none)); break;
        case Op::kNewTrue:
        case Op::kNewFalse: {
          auto v = make(PickleValue::Kind::boolean);
          v->integer = op == static_cast<uint8_t>(Op::kNewTrue);
          push(v);
          break;
        }
        case Op::kBinInt: push_integer(static_cast<int32_t>(little(4))); break;
        case Op::kBinInt1: push_integer(static_cast<int64_t>(little(1))); break;
        case Op::kBinInt2: push_integer(static_cast<int64_t>(little(2))); break;
        case Op::kLong1: {
          const size_t n = byte();
          if (n > 8) fail("an integer wider than 64 bits");
          uint64_t u = n ? little(n) : 0;
          if (n && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t{0} << (8 * n);  // sign-extend
          push_integer(static_cast<int64_t>(u));
          break;
        }
        case Op::kBinFloat: {  // BINFLOAT, big-endian
          uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = bits << 8 | byte();
          auto v = make(PickleValue::Kind::real);
          std::memcpy(&v->real, &bits, 8);
          push(v);
          break;
        }
        case Op::kBinUnicode: push_text(take(little(4))); break;
        case Op::kShortBinUnicode: push_text(take(byte())); break;
        case Op::kBinString: push_text(take(little(4))); break;
        case Op::kShortBinString: push_text(take(byte())); break;
        case Op::kEmptyTuple: push(make(PickleValue::Kind::tuple)); break;
        case Op::kEmptyList: push(make(PickleValue::Kind::list)); break;
        case Op::kEmptyDict: push(make(PickleValue::Kind::dict)); break;
        case Op::kTuple1:
        case Op::kTuple2:
        case Op::kTuple3: {
          auto v = make(PickleValue::Kind::tuple);
          std::vector<PickleValuePtr> items(op - static_cast<uint8_t>(Op::kTuple1) + 1);
          for (size_t i = items.size(); i-- > 0;) items[i] = pop();
          for (auto& item : items) append(*v, std::move(item));
          push(v);
          break;
        }
        case Op::kTuple:
        case Op::kList: {  // TUPLE, LIST from the mark
          auto v = make(op == static_cast<uint8_t>(Op::kTuple) ? PickleValue::Kind::tuple : PickleValue::Kind::list);
          for (auto& item : pop_to_mark()) append(*v, std::move(item));
          push(v);
          break;
        }
        case Op::kDict: {  // DICT from the mark
          auto v = make(PickleValue::Kind::dict);
          set_items(*v, pop_to_mark());
          push(v);
          break;
        }
        case Op::kAppend: {
          auto item = pop();
          append(list_on_top(), std::move(item));
          break;
        }
        case Op::kAppends: {
          auto items = pop_to_mark();
          auto& list = list_on_top();
          for (auto& item : items) append(list, std::move(item));
          break;
        }
        case Op::kSetItem: {
          auto value = pop(), key = pop();
          set_item(dict_on_top(), std::move(key), std::move(value));
          break;
        }
        case Op::kSetItems: {
          auto items = pop_to_mark();
          set_items(dict_on_top(), items);
          break;
        }
        case Op::kBinPut: memo_[little(1)] = top(); break;
        case Op::kLongBinPut: memo_[little(4)] = top(); break;
        case Op::kMemoize: memo_[memo_.size()] = top(); break;
        case Op::kBinGet: push(memo(little(1))); break;
        case Op::kLongBinGet: push(memo(little(4))); break;
        case Op::kGlobal: {  // GLOBAL "module\nname\n"
          const std::string module = line(), name = line();
          push(global(module, name));
          break;
        }
        case Op::kStackGlobal: {
          auto name = pop(), module = pop();
          if (name->kind != PickleValue::Kind::text || module->kind != PickleValue::Kind::text)
            fail("a malformed class name");
          push(global(module->text, name->text));
          break;
        }
        case Op::kReduce: {  // REDUCE: callable(*args)
          auto args = pop(), callable = pop();
          push(reduce(*callable, *args));
          break;
        }
        case Op::kBuild: {  // BUILD: the object's state (OrderedDict's _metadata, the module versions): not needed
          pop();
          break;
        }
        case Op::kBinPersId: push(persistent_load(*pop())); break;
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

  void push(PickleValuePtr v) { stack_.push_back(std::move(v)); }
  void push_integer(int64_t i) {
    auto v = make(PickleValue::Kind::integer);
    v->integer = i;
    push(v);
  }
  void push_text(std::string s) {
    auto v = make(PickleValue::Kind::text);
    v->text = std::move(s);
    push(v);
  }
  PickleValuePtr pop() {
    if (stack_.empty()) fail("a malformed pickle (empty stack)");
    auto v = stack_.back();
    stack_.pop_back();
    return v;
  }
  const PickleValuePtr& top() {
    if (stack_.empty()) fail("a malformed pickle (empty stack)");
    return stack_.back();
  }
  std::vector<PickleValuePtr> pop_to_mark() {
    std::vector<PickleValuePtr> items;
    for (;;) {
      auto v = pop();
      if (v->kind == PickleValue::Kind::mark) break;
      items.push_back(v);
    }
    return {items.rbegin(), items.rend()};
  }
  PickleValue& list_on_top() {
    if (top()->kind != PickleValue::Kind::list) fail("an append to something other than a list");
    return *top();
  }
  PickleValue& dict_on_top() {
    if (top()->kind != PickleValue::Kind::dict) fail("an item set on something other than a dict");
    return *top();
  }
  void set_items(PickleValue& dict, const std::vector<PickleValuePtr>& flat) {
    if (flat.size() % 2) fail("a dict with a key and no value");
    for (size_t i = 0; i < flat.size(); i += 2) set_item(dict, flat[i], flat[i + 1]);
  }
  // A second reference to a value. Never to a list, tuple or dict: a state dict shares only tensors, strings
  // and class names, and a shared container is how a pickle builds a cycle (a list inside itself), which
  // reference counting would never free.
  PickleValuePtr memo(uint64_t key) {
    const auto it = memo_.find(key);
    if (it == memo_.end()) fail("a reference to an unknown memo entry");
    if (is_container(*it->second)) fail("a second reference to a list, tuple or dict");
    return it->second;
  }

  PickleValuePtr make(PickleValue::Kind kind) {
    if (++values_ > kMaxValues) fail("more than " + std::to_string(kMaxValues) + " values");
    auto v = std::make_shared<PickleValue>();
    v->kind = kind;
    return v;
  }

  // An item into a tuple or list, and a key and value into a dict, each nesting the container one deeper.
  void nest(PickleValue& container, const PickleValue& item) {
    if (item.nesting + 1 > kMaxNesting) fail("values nested more than " + std::to_string(kMaxNesting) + " deep");
    container.nesting = std::max(container.nesting, item.nesting + 1);
  }
  void append(PickleValue& container, PickleValuePtr item) {
    nest(container, *item);
    container.items.push_back(std::move(item));
  }
  void set_item(PickleValue& dict, PickleValuePtr key, PickleValuePtr value) {
    nest(dict, *key);
    nest(dict, *value);
    dict.entries.emplace_back(std::move(key), std::move(value));
  }

  // The only classes and functions a state dict names. Anything else (argparse.Namespace in a training
  // script's checkpoint, a model class pickled whole, or something made to run code) is refused here.
  PickleValuePtr global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    if (storage_types().count(full)) {
      auto v = make(PickleValue::Kind::storage_class);
      v->text = full;
      return v;
    }
    const auto it = callables().find(full);
    if (it == callables().end())
      throw WeightsError(file_ + ": holds a Python object of class " + full +
                         ", which is not read (only tensors, dicts, lists, numbers and strings are, and nothing in "
                         "the file is run); save the state dict alone: torch.save(model.state_dict(), path)");
    auto v = make(PickleValue::Kind::callable);
    v->text = full;
    v->callable = it->second;
    return v;
  }

  std::vector<int64_t> sizes(const PickleValue& tuple) const {
    if (tuple.items.size() > kMaxTensorDims)
      fail("a tensor of more than " + std::to_string(kMaxTensorDims) + " dimensions");
    std::vector<int64_t> out;
    for (const auto& item : tuple.items) {
      if (item->kind != PickleValue::Kind::integer || item->integer < 0)
        fail("a tensor size or stride that is not a whole number >= 0");
      out.push_back(item->integer);
    }
    return out;
  }

  PickleValuePtr reduce(const PickleValue& callable, const PickleValue& args) {
    if (callable.kind != PickleValue::Kind::callable || args.kind != PickleValue::Kind::tuple)
      fail("a call of something other than a known function");
    const auto& a = args.items;
    switch (callable.callable) {
      case PickleCallable::ordered_dict:
        if (!a.empty()) fail("an OrderedDict made from arguments");
        return make(PickleValue::Kind::dict);
      case PickleCallable::rebuild_parameter:
        if (a.empty() || a[0]->kind != PickleValue::Kind::tensor) fail("a parameter without a tensor");
        return a[0];
      case PickleCallable::rebuild_tensor: {
        // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
        if (a.size() < 4 || a[0]->kind != PickleValue::Kind::tensor || a[1]->kind != PickleValue::Kind::integer ||
            a[2]->kind != PickleValue::Kind::tuple || a[3]->kind != PickleValue::Kind::tuple)
          fail("a tensor with malformed arguments");
        const torch::Tensor& storage = a[0]->tensor;
        const int64_t offset = a[1]->integer;
        const auto size = sizes(*a[2]), stride = sizes(*a[3]);
        if (size.size() != stride.size()) fail("a tensor whose size and stride differ in length");
        if (offset < 0 ||
            !strided_view_fits(size, stride, static_cast<uint64_t>(offset), static_cast<uint64_t>(storage.numel())))
          throw WeightsError(file_ + ": a tensor reaches past the end of its storage (damaged file)");
        if (view_outnumbers_storage(size, static_cast<uint64_t>(storage.numel())))
          throw WeightsError(file_ + ": a tensor holds more elements than its storage (a broadcast view, which no "
                                     "state dict saves; save tensor.contiguous() or .clone())");
        auto v = make(PickleValue::Kind::tensor);
        v->tensor = storage.as_strided(size, stride, offset);
        return v;
      }
    }
    fail("an unknown call");
  }

  // ('storage', storage class, key, location, numel): the loader gives the storage's contents.
  PickleValuePtr persistent_load(const PickleValue& id) {
    if (id.kind != PickleValue::Kind::tuple || id.items.size() < 5 || id.items[0]->kind != PickleValue::Kind::text ||
        id.items[0]->text != "storage" || id.items[1]->kind != PickleValue::Kind::storage_class ||
        id.items[2]->kind != PickleValue::Kind::text || id.items[4]->kind != PickleValue::Kind::integer)
      fail("a reference to something other than a tensor storage");
    const std::string& key = id.items[2]->text;
    if (auto cached = storages_.find(key); cached != storages_.end()) return cached->second;
    auto v = make(PickleValue::Kind::tensor);
    v->tensor = load_storage_(key, storage_types().at(id.items[1]->text), id.items[4]->integer);
    storages_[key] = v;
    return v;
  }

  std::string file_;
  const std::string& p_;
  size_t at_ = 0;
  const StorageLoader& load_storage_;
  std::vector<PickleValuePtr> stack_;
  std::map<uint64_t, PickleValuePtr> memo_;
  std::map<std::string, PickleValuePtr> storages_;
  size_t values_ = 0;  // made so far, against kMaxValues
};

}  // namespace

PickleValuePtr unpickle_state_dict(const std::string& file, const std::string& pickle, const StorageLoader& storage) {
  return Unpickler(file, pickle, storage).run();
}

}  // namespace trainer
