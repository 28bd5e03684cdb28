#include "trainer/io/pickle_scan.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <vector>

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

std::string at(const char* what, size_t offset) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s at byte %zu of its pickle", what, offset);
  return buf;
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

}  // namespace

std::optional<std::string> pickle_structure_problem(std::string_view p) {
  static constexpr std::array<Arg, 256> kLayouts = argument_layouts();
  // Values above each open mark, the first entry for those below every mark: a pickle that pops what is not there
  // or ends with anything but its one value on the stack is not one Python wrote (LibTorch then fails its own way,
  // allocating what a damaged debug record's offsets ask for).
  std::vector<size_t> frames{0};
  size_t i = 0;
  const auto little = [&](size_t from, size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= uint64_t{static_cast<uint8_t>(p[from + k])} << (8 * k);
    return v;
  };
  while (i < p.size()) {
    const size_t start = i;
    const auto op = static_cast<uint8_t>(p[i++]);
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
        // FRAME's argument is the length of the frame that follows.
        if (op == 0x95 && little(i, 8) > left - 8) return at("a frame longer than the pickle", start);
        i += n;
        break;
      }
      case Arg::length1:
      case Arg::length4:
      case Arg::length8: {
        const size_t n = kLayouts[op] == Arg::length1 ? 1 : kLayouts[op] == Arg::length4 ? 4 : 8;
        if (n > left) return at("a length cut short", start);
        const uint64_t length = little(i, n);
        if (length > left - n) return at("a length longer than the pickle", start);
        i += n + length;
        break;
      }
      case Arg::line:
      case Arg::two_lines:
        for (int lines = kLayouts[op] == Arg::line ? 1 : 2; lines > 0; --lines) {
          const size_t end = p.find('\n', i);
          if (end == std::string_view::npos) return at("a line with no end", start);
          i = end + 1;
        }
        break;
    }
    if (op == '(') {
      frames.push_back(0);
      continue;
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
      return std::nullopt;
    }
  }
  return "no STOP instruction (cut short)";
}

}  // namespace trainer
