#include "trainer/io/pickle_scan.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <initializer_list>

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

}  // namespace

std::optional<std::string> pickle_structure_problem(std::string_view p) {
  static constexpr std::array<Arg, 256> kLayouts = argument_layouts();
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
      case Arg::none:
        if (op == '.') return std::nullopt;
        break;
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
  }
  return "no STOP instruction (cut short)";
}

}  // namespace trainer
