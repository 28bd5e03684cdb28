#include "trainer/io/pickle_scan.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "trainer/util/checked_math.hpp"
#include "trainer/util/text.hpp"

namespace trainer {

namespace {

// How an instruction's argument is laid out (Python's pickletools names every instruction and its argument).
enum class Arg : uint8_t {
  unknown,
  none,
  fixed1,
  fixed2,
  fixed4,
  fixed8,
  length1,  // a 1-byte length, then that many bytes
  length4,
  length8,
  line,       // up to a newline
  two_lines,  // module and name, each up to a newline
};

constexpr std::array<Arg, 256> argument_layouts() {
  std::array<Arg, 256> a{};
  const auto set = [&a](Arg arg, std::initializer_list<int> ops) {
    for (const int op : ops) a[static_cast<size_t>(op)] = arg;
  };
  set(Arg::none, {'(', '.', '0', '1', '2', 'N', 'R', 'a', 'b', 'd', '}', 'e', 'l', ']', 'o', 's', 't', ')', 'u', 'Q'});
  // NEWOBJ, TUPLE1-3, NEWTRUE, NEWFALSE, EMPTY_SET, ADDITEMS, FROZENSET, NEWOBJ_EX, STACK_GLOBAL, MEMOIZE,
  // NEXT_BUFFER, READONLY_BUFFER
  set(Arg::none, {0x81, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x97, 0x98});
  set(Arg::fixed1, {0x80, 'K', 'h', 'q', 0x82});  // PROTO, BININT1, BINGET, BINPUT, EXT1
  set(Arg::fixed2, {'M', 0x83});                  // BININT2, EXT2
  set(Arg::fixed4, {'J', 'j', 'r', 0x84});        // BININT, LONG_BINGET, LONG_BINPUT, EXT4
  set(Arg::fixed8, {'G', 0x95});                  // BINFLOAT, FRAME
  set(Arg::length1, {'U', 0x8c, 'C', 0x8a});      // SHORT_BINSTRING, SHORT_BINUNICODE, SHORT_BINBYTES, LONG1
  set(Arg::length4, {'T', 'X', 'B', 0x8b});       // BINSTRING, BINUNICODE, BINBYTES, LONG4
  set(Arg::length8, {0x8d, 0x8e, 0x96});          // BINUNICODE8, BINBYTES8, BYTEARRAY8
  set(Arg::line, {'I', 'L', 'F', 'S', 'V', 'P', 'g', 'p'});
  set(Arg::two_lines, {'c', 'i'});  // GLOBAL, INST
  return a;
}

std::string at(const std::string& what, size_t offset) {
  return what + " at byte " + std::to_string(offset) + " of its pickle";
}

// What an instruction does to the stack (Python's pickle.py): pops so many values, or every value down to the
// last mark (and the mark), then pushes so many. Instructions not listed push one value (numbers, strings, GLOBAL,
// the memo's GET, ...).
struct StackEffect {
  int pops = 0;
  bool to_mark = false;
  int pushes = 1;
};

StackEffect stack_effect(uint8_t op) {
  switch (op) {
    case '(': return {0, false, 0};  // MARK: counted apart
    case '.': return {1, false, 0};  // STOP
    case '0': return {1, false, 0};  // POP
    case '1': return {0, true, 0};   // POP_MARK
    case 0x80:                       // PROTO
    case 0x95:                       // FRAME
    case 'p':                        // PUT
    case 'q':                        // BINPUT
    case 'r':                        // LONG_BINPUT
    case 0x94:                       // MEMOIZE
    case 0x98:                       // READONLY_BUFFER
      return {0, false, 0};
    case 'Q': return {1, false, 1};  // BINPERSID
    case 'R':                        // REDUCE
    case 'b':                        // BUILD
    case 0x81:                       // NEWOBJ
    case 0x93:                       // STACK_GLOBAL
      return {2, false, 1};
    case 0x92: return {3, false, 1};  // NEWOBJ_EX
    case 0x85: return {1, false, 1};  // TUPLE1
    case 0x86: return {2, false, 1};  // TUPLE2
    case 0x87: return {3, false, 1};  // TUPLE3
    case 'a': return {1, false, 0};   // APPEND (into the list below it)
    case 's': return {2, false, 0};   // SETITEM
    case 't':                         // TUPLE
    case 'l':                         // LIST
    case 'd':                         // DICT
    case 'i':                         // INST
    case 'o':                         // OBJ
    case 0x91:                        // FROZENSET
      return {0, true, 1};
    case 'e':   // APPENDS
    case 'u':   // SETITEMS
    case 0x90:  // ADDITEMS
      return {0, true, 0};
    default: return {};
  }
}

// One instruction as the walks see it: its opcode, where it starts, and its argument (a string's contents, a
// number's bytes, a line without its newline; GLOBAL's module and name as `arg` and `arg2`).
struct Instruction {
  uint8_t op = 0;
  size_t offset = 0;
  std::string_view arg, arg2;
};

uint64_t little_endian(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t k = 0; k < bytes.size() && k < 8; ++k) v |= uint64_t{static_cast<uint8_t>(bytes[k])} << (8 * k);
  return v;
}

// Decodes the instruction at `i` and moves `i` past it; what is wrong, if its argument leaves the pickle.
std::optional<std::string> decode(std::string_view p, size_t& i, Instruction& out) {
  static constexpr std::array<Arg, 256> kLayouts = argument_layouts();
  out = Instruction{static_cast<uint8_t>(p[i]), i, {}, {}};
  const uint8_t op = out.op;
  const size_t start = i++;
  const size_t left = p.size() - i;
  switch (kLayouts[op]) {
    case Arg::unknown: return at("an instruction that is not Python's", start);
    case Arg::none: break;
    case Arg::fixed1:
    case Arg::fixed2:
    case Arg::fixed4:
    case Arg::fixed8: {
      const size_t n = kLayouts[op] == Arg::fixed1   ? 1
                       : kLayouts[op] == Arg::fixed2 ? 2
                       : kLayouts[op] == Arg::fixed4 ? 4
                                                     : 8;
      if (n > left) return at("an argument cut short", start);
      out.arg = p.substr(i, n);
      // FRAME's argument is the length of the frame that follows.
      if (op == 0x95 && little_endian(out.arg) > left - 8) return at("a frame longer than the pickle", start);
      i += n;
      break;
    }
    case Arg::length1:
    case Arg::length4:
    case Arg::length8: {
      const size_t n = kLayouts[op] == Arg::length1 ? 1 : kLayouts[op] == Arg::length4 ? 4 : 8;
      if (n > left) return at("a length cut short", start);
      const uint64_t length = little_endian(p.substr(i, n));
      if (length > left - n) return at("a length longer than the pickle", start);
      out.arg = p.substr(i + n, length);
      i += n + length;
      break;
    }
    case Arg::line:
    case Arg::two_lines:
      for (int line = 0; line < (kLayouts[op] == Arg::line ? 1 : 2); ++line) {
        const size_t end = p.find('\n', i);
        if (end == std::string_view::npos) return at("a line with no end", start);
        (line == 0 ? out.arg : out.arg2) = p.substr(i, end - i);
        i = end + 1;
      }
      break;
  }
  return std::nullopt;
}

// A checkpoint's pickle nests about 20 deep (a module's object, its attribute dict, a tensor's arguments, per
// level). LibTorch frees a nested value recursively, so 200,000 nested lists (600 KB) overflow its stack.
constexpr uint32_t kMostNesting = 256;
// More values than a checkpoint's pickle makes (ResNet-152's with its optimizer state, about 50,000), so that a
// hostile one cannot make the walks hold gigabytes of them.
constexpr size_t kMostSymbols = size_t{1} << 22;

// How deep the values a pickle builds nest, and that none holds itself. Values are followed by identity, through
// the memo: a container may be referenced twice (LibTorch's pickler memoizes a shared list), but once placed in
// another (or made by REDUCE, whose result LibTorch may alias to an argument) it is sealed, and a change to a
// sealed container is refused. That is every cycle (a list placed inside itself, or inside what it holds), and it
// keeps each depth final once counted. LibTorch writes every container whole before it places it anywhere.
// Runs after the structure walk, so every instruction finds what it takes on the stack.
std::optional<std::string> nesting_problem(std::string_view p) {
  struct Node {
    uint32_t depth = 1;
    bool sealed = false;
  };
  std::vector<Node> nodes;  // value v > 0 is nodes[v - 1]; 0 is a leaf (a number, a text, a class)
  std::vector<uint32_t> stack;
  std::vector<size_t> marks;
  std::unordered_map<uint64_t, uint32_t> memo;
  size_t made = 0;  // values pushed and memo entries stored, bounded as the tensor walk bounds them
  const auto depth = [&](uint32_t v) { return v ? nodes[v - 1].depth : 0u; };
  const auto take = [&](size_t n) {
    n = std::min(n, stack.size());
    std::vector<uint32_t> taken(stack.end() - static_cast<std::ptrdiff_t>(n), stack.end());
    stack.resize(stack.size() - n);
    return taken;
  };
  const auto take_to_mark = [&]() {
    const size_t mark = marks.empty() ? 0 : std::min(marks.back(), stack.size());
    if (!marks.empty()) marks.pop_back();
    return take(stack.size() - mark);
  };
  // A new value holding `items` (none: an empty container), pushed.
  const auto make = [&](const std::vector<uint32_t>& items, bool sealed) -> std::optional<std::string> {
    Node n;
    n.sealed = sealed;
    for (const uint32_t item : items) {
      n.depth = std::max(n.depth, depth(item) + 1);
      if (item) nodes[item - 1].sealed = true;
    }
    if (n.depth > kMostNesting) return "values nested more than " + std::to_string(kMostNesting) + " deep";
    nodes.push_back(n);
    stack.push_back(static_cast<uint32_t>(nodes.size()));
    return std::nullopt;
  };
  // `items` placed into the container on top of the stack (APPEND, SETITEM, BUILD, ...).
  const auto place = [&](const std::vector<uint32_t>& items) -> std::optional<std::string> {
    const uint32_t target = stack.empty() ? 0 : stack.back();
    for (const uint32_t item : items) {
      if (target) {
        Node& t = nodes[target - 1];
        if (t.sealed || item == target)
          return std::string("a container changed after it was placed in another (how a pickle makes a cycle)");
        t.depth = std::max(t.depth, depth(item) + 1);
        if (t.depth > kMostNesting) return "values nested more than " + std::to_string(kMostNesting) + " deep";
      }
      if (item) nodes[item - 1].sealed = true;
    }
    return std::nullopt;
  };
  size_t i = 0;
  Instruction in;
  while (i < p.size() && !decode(p, i, in)) {
    if (++made > kMostSymbols) return at("more values than any checkpoint holds", in.offset);
    std::optional<std::string> problem;
    switch (in.op) {
      case '.': return std::nullopt;
      case '(': marks.push_back(stack.size()); break;
      case 'p': memo[std::strtoull(std::string(in.arg).c_str(), nullptr, 10)] = stack.back(); break;  // PUT
      case 'q':                                                                                       // BINPUT
      case 'r': memo[little_endian(in.arg)] = stack.back(); break;                                    // LONG_BINPUT
      case 0x94: memo[memo.size()] = stack.back(); break;                                             // MEMOIZE
      case 'g': {                                                                                     // GET
        const auto it = memo.find(std::strtoull(std::string(in.arg).c_str(), nullptr, 10));
        stack.push_back(it == memo.end() ? 0 : it->second);
        break;
      }
      case 'h':    // BINGET
      case 'j': {  // LONG_BINGET
        const auto it = memo.find(little_endian(in.arg));
        stack.push_back(it == memo.end() ? 0 : it->second);
        break;
      }
      case '2': stack.push_back(stack.back()); break;  // DUP
      case 'a':                                        // APPEND
      case 'b':                                        // BUILD
        problem = place(take(1));
        break;
      case 's': problem = place(take(2)); break;  // SETITEM
      case 'e':                                   // APPENDS
      case 'u':                                   // SETITEMS
      case 0x90:                                  // ADDITEMS
        problem = place(take_to_mark());
        break;
      case ']':   // EMPTY_LIST
      case '}':   // EMPTY_DICT
      case ')':   // EMPTY_TUPLE
      case 0x8f:  // EMPTY_SET
        problem = make({}, false);
        break;
      case 'R':  // REDUCE: what it returns may be an argument (restore_type_tag returns its list)
      case 'Q':  // BINPERSID
        problem = make(take(in.op == 'R' ? 2 : 1), true);
        break;
      default: {
        const StackEffect e = stack_effect(in.op);
        std::vector<uint32_t> items = e.to_mark ? take_to_mark() : std::vector<uint32_t>{};
        const auto popped = take(static_cast<size_t>(e.pops));
        items.insert(items.end(), popped.begin(), popped.end());
        if (e.pushes == 0) break;               // POP, POP_MARK, PROTO, FRAME, ...
        if (items.empty()) stack.push_back(0);  // a number, a text, None, GLOBAL
        else problem = make(items, false);      // TUPLE, LIST, DICT, NEWOBJ, STACK_GLOBAL, ...
      }
    }
    if (problem) return at(*problem, in.offset);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> pickle_structure_problem(std::string_view p) {
  // Values above each open mark, the first entry for those below every mark: a pickle that pops what is not there
  // or ends with anything but its one value on the stack is not one Python wrote (LibTorch then fails its own way,
  // allocating what a damaged debug record's offsets ask for).
  std::vector<size_t> frames{0};
  // LibTorch's unpickler grows its memo to hold the index a PUT names (16 bytes an entry: LONG_BINPUT's 32-bit
  // index asks for up to 64 GiB). Python's and LibTorch's picklers number memo entries 0, 1, 2, ... as they store
  // them, so an index is at most the count stored so far.
  uint64_t memo_entries = 0;
  size_t i = 0;
  Instruction in;
  while (i < p.size()) {
    if (auto problem = decode(p, i, in)) return problem;
    const uint8_t op = in.op;
    const size_t start = in.offset;
    if (op == '(') {
      frames.push_back(0);
      continue;
    }
    if (op == 'p' || op == 'q' || op == 'r' || op == 0x94) {
      const uint64_t index = op == 0x94  ? memo_entries
                             : op == 'p' ? std::strtoull(std::string(in.arg).c_str(), nullptr, 10)
                                         : little_endian(in.arg);
      if (index > memo_entries)
        return at("a memo entry stored at index " + std::to_string(index) + " after " + std::to_string(memo_entries) +
                      " entries (its picklers count up from 0)",
                  start);
      if (index == memo_entries) ++memo_entries;
    }
    const StackEffect e = stack_effect(op);
    if (e.to_mark) {
      if (frames.size() < 2) return at("a mark taken that was never set", start);
      frames.pop_back();
    }
    // Memo puts and APPEND/SETITEM(S) need a value below what they take.
    const bool needs_below = op == 'p' || op == 'q' || op == 'r' || op == 0x94 || op == 'a' || op == 's' || op == 'e' ||
                             op == 'u' || op == 0x90 || op == 0x98;
    if (frames.back() < static_cast<size_t>(e.pops) + (needs_below ? 1 : 0))
      return at("an instruction taking more values than the stack holds", start);
    frames.back() -= static_cast<size_t>(e.pops);
    frames.back() += static_cast<size_t>(e.pushes);
    if (op == '.') {
      if (frames.size() != 1 || frames.back() != 0) return at("values left on the stack at STOP", start);
      return nesting_problem(p);
    }
  }
  return "no STOP instruction (cut short)";
}

namespace {

// What the tensor walk knows of a value: integers, texts, shallow tuples, storages and the classes a pickle names;
// everything else (dicts, lists, objects, tensors) is `other`, whose contents nothing here needs.
struct Symbol {
  enum class Kind : uint8_t { other, integer, text, tuple, storage, global };
  Kind kind = Kind::other;
  int64_t integer = 0;    // integer; storage: its element count
  std::string_view text;  // text; storage: its key
  uint8_t item_size = 0;  // storage, and the global naming a storage class: bytes per element
  uint8_t depth = 0;      // tuple: 1 + its deepest kept item's
  enum class Global : uint8_t { other, rebuild_tensor, storage_class, type_tag } global = Global::other;
  std::shared_ptr<const std::vector<Symbol>> items;  // tuple
};

// Tuples are kept to the depth a tensor's arguments need, (storage, offset, (sizes), (strides), ...), so that no
// chain of them is deep enough to overflow the stack when it is destroyed.
constexpr uint8_t kKeptDepth = 2;
constexpr size_t kMostTensorDims = 64;

// The element size of LibTorch's storage classes, by name (`torch.FloatStorage` and its kin); 0 for any other.
uint8_t storage_item_size(std::string_view name) {
  static constexpr std::pair<std::string_view, uint8_t> kSizes[] = {
      {"FloatStorage", 4}, {"DoubleStorage", 8}, {"HalfStorage", 2},         {"BFloat16Storage", 2},
      {"LongStorage", 8},  {"IntStorage", 4},    {"ShortStorage", 2},        {"CharStorage", 1},
      {"ByteStorage", 1},  {"BoolStorage", 1},   {"ComplexFloatStorage", 8}, {"ComplexDoubleStorage", 16}};
  for (const auto& [known, size] : kSizes)
    if (known == name) return size;
  return 0;
}

// The classes LibTorch's archives name (torch::serialize::OutputArchive, TorchScript modules): the archive's own
// module classes, resolved against its code/ records, tensors from storages, and the list and type-tag helpers.
// LibTorch's unpickler also builds quantized, sparse and subclassed tensors and remote references, without checking
// them against anything; no trainer checkpoint holds one.
std::optional<Symbol> named_class(std::string_view module, std::string_view name) {
  Symbol s;
  s.kind = Symbol::Kind::global;
  // __torch__.torch.classes.* are LibTorch's custom C++ classes, each with a __setstate__ of its own.
  if (module == "__torch__" || (starts_with(module, "__torch__.") && !starts_with(module, "__torch__.torch.")))
    return s;
  if (module == "collections" && name == "OrderedDict") return s;
  if (module == "torch.jit._pickle" &&
      (name == "build_intlist" || name == "build_tensorlist" || name == "build_doublelist" || name == "build_boollist"))
    return s;
  if (module == "torch.jit._pickle" && name == "restore_type_tag") {
    s.global = Symbol::Global::type_tag;
    return s;
  }
  if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
    s.global = Symbol::Global::rebuild_tensor;
    return s;
  }
  if (module == "torch" && (s.item_size = storage_item_size(name)) != 0) {
    s.global = Symbol::Global::storage_class;
    return s;
  }
  return std::nullopt;
}

// A name from the pickle as an error message may show it: one line of at most 80 printable characters.
std::string shown(std::string_view name) {
  std::string out;
  for (const char c : name.substr(0, 80)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return name.size() > 80 ? out + "..." : out;
}

Symbol tuple_of(std::vector<Symbol> items) {
  Symbol t;
  t.kind = Symbol::Kind::tuple;
  uint8_t deepest = 0;
  for (const Symbol& item : items) deepest = std::max(deepest, item.depth);
  if (deepest + 1 > kKeptDepth) {
    t.kind = Symbol::Kind::other;
    return t;
  }
  t.depth = static_cast<uint8_t>(deepest + 1);
  t.items = std::make_shared<const std::vector<Symbol>>(std::move(items));
  return t;
}

// A tuple of whole numbers >= 0 (a tensor's sizes or strides), or nullopt.
std::optional<std::vector<int64_t>> whole_numbers(const Symbol& tuple) {
  if (tuple.kind != Symbol::Kind::tuple || tuple.items->size() > kMostTensorDims) return std::nullopt;
  std::vector<int64_t> numbers;
  for (const Symbol& item : *tuple.items) {
    if (item.kind != Symbol::Kind::integer || item.integer < 0) return std::nullopt;
    numbers.push_back(item.integer);
  }
  return numbers;
}

class TensorWalk {
 public:
  TensorWalk(std::string_view pickle, const StorageRecordSize& record_size) : p_(pickle), record_size_(record_size) {}

  std::optional<std::string> run() {
    size_t i = 0;
    Instruction in;
    while (i < p_.size()) {
      if (auto problem = decode(p_, i, in)) return problem;
      if (in.op == '.') return std::nullopt;
      if (auto problem = step(in)) return at(*problem, in.offset);
    }
    return "no STOP instruction (cut short)";
  }

 private:
  std::optional<std::string> step(const Instruction& in) {
    switch (in.op) {
      case '(': marks_.push_back(stack_.size()); return std::nullopt;
      case 'K':  // BININT1
      case 'M':  // BININT2
        return push_integer(static_cast<int64_t>(little_endian(in.arg)));
      case 'J': return push_integer(static_cast<int32_t>(little_endian(in.arg)));  // BININT
      case 0x8a: {                                                                 // LONG1
        if (in.arg.size() > 8) return push(Symbol{});
        uint64_t u = little_endian(in.arg);
        const size_t n = in.arg.size();
        if (n && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t{0} << (8 * n);  // sign-extend
        return push_integer(static_cast<int64_t>(u));
      }
      case 'X':    // BINUNICODE
      case 0x8c:   // SHORT_BINUNICODE
      case 0x8d:   // BINUNICODE8
      case 'T':    // BINSTRING
      case 'U': {  // SHORT_BINSTRING
        Symbol s;
        s.kind = Symbol::Kind::text;
        s.text = in.arg;
        return push(s);
      }
      case ')': return push(tuple_of({}));  // EMPTY_TUPLE
      case 0x85:                            // TUPLE1-3
      case 0x86:
      case 0x87: return push(tuple_of(take(static_cast<size_t>(in.op - 0x84))));
      case 't': return push(tuple_of(take_to_mark()));  // TUPLE
      case 'c': {                                       // GLOBAL
        auto s = named_class(in.arg, in.arg2);
        if (!s) return "a class no trainer checkpoint names (" + shown(in.arg) + "." + shown(in.arg2) + ")";
        return push(*s);
      }
      case 0x93: {  // STACK_GLOBAL
        const auto names = take(2);
        if (names[0].kind != Symbol::Kind::text || names[1].kind != Symbol::Kind::text)
          return std::string("a class named by values that are not texts");
        auto s = named_class(names[0].text, names[1].text);
        if (!s)
          return "a class no trainer checkpoint names (" + shown(names[0].text) + "." + shown(names[1].text) + ")";
        return push(*s);
      }
      case 'Q': return persistent_storage(take(1)[0]);  // BINPERSID
      case 'P': return std::string("a persistent id in text (protocol 0)");
      case 'R': {  // REDUCE
        auto call = take(2);
        if (call[0].kind == Symbol::Kind::global && call[0].global == Symbol::Global::rebuild_tensor)
          if (auto problem = tensor(call[1])) return problem;
        if (call[0].kind == Symbol::Kind::global && call[0].global == Symbol::Global::type_tag)
          if (auto problem = type_tag(call[1])) return problem;
        return push(Symbol{});
      }
      case 'q':  // BINPUT
      case 'r':  // LONG_BINPUT
        return memo_put(little_endian(in.arg));
      case 'p': return memo_put(std::strtoull(std::string(in.arg).c_str(), nullptr, 10));  // PUT
      case 0x94: return memo_put(memo_.size());                                            // MEMOIZE
      case 'h':                                                                            // BINGET
      case 'j':                                                                            // LONG_BINGET
        return memo_get(little_endian(in.arg));
      case 'g': return memo_get(std::strtoull(std::string(in.arg).c_str(), nullptr, 10));  // GET
      default: {
        // Every other instruction by its effect on the stack alone: what it makes is `other`.
        const StackEffect e = stack_effect(in.op);
        if (e.to_mark) take_to_mark();
        take(static_cast<size_t>(e.pops));
        for (int k = 0; k < e.pushes; ++k)
          if (auto problem = push(Symbol{})) return problem;
        return std::nullopt;
      }
    }
  }

  // BINPERSID's ('storage', class, key, location, numel), the only persistent id LibTorch reads: the record
  // <pickle's name>/<key> must hold numel elements exactly. LibTorch takes the element count from the pickle and
  // the bytes from the record, and reads past the record's end where the first is larger.
  std::optional<std::string> persistent_storage(const Symbol& id) {
    const auto* f = id.kind == Symbol::Kind::tuple ? id.items.get() : nullptr;
    if (!f || f->size() != 5 || (*f)[0].kind != Symbol::Kind::text || (*f)[0].text != "storage" ||
        (*f)[1].global != Symbol::Global::storage_class || (*f)[2].kind != Symbol::Kind::text ||
        (*f)[3].kind != Symbol::Kind::text || (*f)[4].kind != Symbol::Kind::integer || (*f)[4].integer < 0)
      return std::string("a persistent id that is not a storage's");
    Symbol storage;
    storage.kind = Symbol::Kind::storage;
    storage.text = (*f)[2].text;
    storage.item_size = (*f)[1].item_size;
    storage.integer = (*f)[4].integer;
    uint64_t bytes = 0;
    if (multiply_overflows(static_cast<uint64_t>(storage.integer), storage.item_size, bytes))
      return "storage " + shown(storage.text) + " declaring more bytes than 64 bits count";
    if (bytes > 0) {
      const auto recorded = record_size_(storage.text);
      if (!recorded) return "storage " + shown(storage.text) + " with no record";
      if (*recorded != bytes)
        return "storage " + shown(storage.text) + " declaring " + std::to_string(bytes) +
               " bytes where its record holds " + std::to_string(*recorded);
    }
    return push(storage);
  }

  // _rebuild_tensor_v2(storage, offset, sizes, strides, requires_grad, hooks[, metadata]): LibTorch sets the sizes,
  // strides and offset on the storage as written, with no check that they stay inside it.
  std::optional<std::string> tensor(const Symbol& args) {
    const auto* a = args.kind == Symbol::Kind::tuple ? args.items.get() : nullptr;
    if (!a || a->size() < 6 || a->size() > 7 || (*a)[0].kind != Symbol::Kind::storage ||
        (*a)[1].kind != Symbol::Kind::integer || (*a)[1].integer < 0)
      return std::string("a tensor whose arguments are not a storage, an offset, sizes and strides");
    const auto sizes = whole_numbers((*a)[2]), strides = whole_numbers((*a)[3]);
    if (!sizes || !strides || sizes->size() != strides->size())
      return std::string("a tensor whose sizes and strides are not as many whole numbers");
    const Symbol& storage = (*a)[0];
    if (!strided_view_fits(*sizes, *strides, static_cast<uint64_t>((*a)[1].integer),
                           static_cast<uint64_t>(storage.integer)))
      return "a tensor reaching past the end of storage " + shown(storage.text) + " (" +
             std::to_string(storage.integer) + " elements)";
    if (view_outnumbers_storage(*sizes, static_cast<uint64_t>(storage.integer)))
      return "a tensor holding more elements than storage " + shown(storage.text) + " (a broadcast view)";
    return std::nullopt;
  }

  // restore_type_tag(value, "Dict[str, Tensor]"): LibTorch parses the text as a type; only the types an archive's
  // attributes have reach its parser.
  std::optional<std::string> type_tag(const Symbol& args) {
    const auto* a = args.kind == Symbol::Kind::tuple ? args.items.get() : nullptr;
    if (!a || a->size() != 2 || (*a)[1].kind != Symbol::Kind::text || !is_archive_type((*a)[1].text))
      return "a type tag that is not an attribute's type" + (a && a->size() == 2 && (*a)[1].kind == Symbol::Kind::text
                                                                 ? " (" + shown((*a)[1].text) + ")"
                                                                 : std::string());
    return std::nullopt;
  }

  std::optional<std::string> push_integer(int64_t value) {
    Symbol s;
    s.kind = Symbol::Kind::integer;
    s.integer = value;
    return push(s);
  }

  std::optional<std::string> push(Symbol s) {
    if (++made_ > kMostSymbols) return std::string("more values than any checkpoint holds");
    stack_.push_back(std::move(s));
    return std::nullopt;
  }

  // The structure walk has checked that every instruction finds what it takes on the stack.
  std::vector<Symbol> take(size_t n) {
    n = std::min(n, stack_.size());
    std::vector<Symbol> taken(std::make_move_iterator(stack_.end() - static_cast<std::ptrdiff_t>(n)),
                              std::make_move_iterator(stack_.end()));
    stack_.resize(stack_.size() - n);
    return taken;
  }

  std::vector<Symbol> take_to_mark() {
    const size_t mark = marks_.empty() ? 0 : marks_.back();
    if (!marks_.empty()) marks_.pop_back();
    return take(stack_.size() - std::min(mark, stack_.size()));
  }

  std::optional<std::string> memo_put(uint64_t index) {
    if (stack_.empty()) return std::string("a memo entry stored from an empty stack");
    if (++made_ > kMostSymbols) return std::string("more values than any checkpoint holds");
    memo_[index] = stack_.back();
    return std::nullopt;
  }

  std::optional<std::string> memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) return std::string("a memo entry read that was never stored");
    return push(it->second);
  }

  std::string_view p_;
  const StorageRecordSize& record_size_;
  std::vector<Symbol> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Symbol> memo_;
  size_t made_ = 0;
};

}  // namespace

bool is_archive_type(std::string_view s, int depth) {
  if (s == "Tensor" || s == "str" || s == "float" || s == "int" || s == "bool") return true;
  for (const std::string_view outer : {"Tuple[", "List[", "Optional[", "Dict["}) {
    if (!starts_with(s, outer) || !ends_with(s, "]") || depth >= 4) continue;
    const std::string_view inner = s.substr(outer.size(), s.size() - outer.size() - 1);
    size_t items = 0, from = 0;
    int level = 0;
    for (size_t i = 0; i <= inner.size(); ++i) {
      if (i < inner.size() && inner[i] == '[') ++level;
      if (i < inner.size() && inner[i] == ']' && --level < 0) return false;
      if (i == inner.size() || (level == 0 && inner.compare(i, 2, ", ") == 0)) {
        if (!is_archive_type(inner.substr(from, i - from), depth + 1)) return false;
        ++items;
        from = i + 2;
      }
    }
    return level == 0 && (outer == "Tuple[" || items == (outer == "Dict[" ? 2u : 1u));
  }
  if (!starts_with(s, "__torch__") || starts_with(s, "__torch__.torch.")) return false;
  for (size_t at = 0;;) {
    const size_t dot = s.find('.', at);
    if (!is_identifier(s.substr(at, dot - at))) return false;
    if (dot == std::string_view::npos) return true;
    at = dot + 1;
  }
}

std::optional<std::string> pickle_tensor_problem(std::string_view pickle, const StorageRecordSize& record_size) {
  if (auto problem = pickle_structure_problem(pickle)) return problem;
  return TensorWalk(pickle, record_size).run();
}

}  // namespace trainer
