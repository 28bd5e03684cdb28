// The walk over a pickle's instructions that runs before LibTorch unpickles a checkpoint's records.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainer/io/pickle_scan.hpp"

using namespace std::string_literals;

namespace trainer {
namespace {

TEST(PickleScan, EveryArgumentLayoutWalksToStop) {
  // PROTO 2, GLOBAL, MARK, BINUNICODE, SHORT_BINUNICODE, LONG1, BININT, BINFLOAT, FRAME, a text line (INT), TUPLE,
  // BINPUT, REDUCE, BINGET, POP, STOP, and bytes after STOP (which nothing reads).
  const std::string pickle =
      "\x80\x02"
      "ctorch\nFloatStorage\n"
      "(X\x03\x00\x00\x00"
      "abc"
      "\x8c\x01"
      "d"
      "\x8a\x02\x01\x02"
      "J\x01\x02\x03\x04"
      "G12345678"
      "\x95\x03\x00\x00\x00\x00\x00\x00\x00"
      "I12\n"
      "tq\x00Rh\x00"
      "0.trailing"s;
  EXPECT_EQ(pickle_structure_problem(pickle), std::nullopt);
}

// What Python's unpickler would refuse for its stack: LibTorch refuses it too, but after allocating what a damaged
// debug record asks for (3 GB from a 2,290-byte checkpoint).
TEST(PickleScan, StackDisciplineIsChecked) {
  EXPECT_EQ(pickle_structure_problem("\x80\x02NN."s), "values left on the stack at STOP at byte 4 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02(N."s), "values left on the stack at STOP at byte 4 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02N"
                                     "a."s),
            "an instruction taking more values than the stack holds at byte 3 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02t."s), "a mark taken that was never set at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02q\x00N."s),
            "an instruction taking more values than the stack holds at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02](K\x01K\x02"
                                     "e."s),
            std::nullopt);
}

// LibTorch's unpickler grows its memo to a PUT's index, 16 bytes an entry: LONG_BINPUT 0x75287d81 asked for
// 31 GB (a fuzzed checkpoint). Indices count up from 0 as the picklers store them; storing again below is allowed.
TEST(PickleScan, MemoIndicesCountUpFromZero) {
  EXPECT_EQ(pickle_structure_problem("\x80\x02Nq\x00q\x01q\x00\x94r\x03\x00\x00\x00p4\n."s), std::nullopt);
  EXPECT_EQ(pickle_structure_problem("\x80\x02Nr\x81\x7d\x28\x75."s),
            "a memo entry stored at index 1965587841 after 0 entries (its picklers count up from 0) at byte 3 of its "
            "pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02Nq\x00q\x02."s),
            "a memo entry stored at index 2 after 1 entries (its picklers count up from 0) at byte 5 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02Np99\n."s),
            "a memo entry stored at index 99 after 0 entries (its picklers count up from 0) at byte 3 of its pickle");
}

// LibTorch frees nested values recursively and never frees a cycle: nesting is bounded at 256 and a container
// changed after it was placed in another (which is how a cycle is made) is refused, while a container referenced
// twice through the memo, as LibTorch's pickler writes a shared list, is not.
TEST(PickleScan, NestingIsBoundedAndCyclesAreRefused) {
  const auto nested = [](int depth) {
    return "\x80\x02"s + std::string(static_cast<size_t>(depth), ']') +
           std::string(static_cast<size_t>(depth - 1), 'a') + ".";
  };
  EXPECT_EQ(pickle_structure_problem(nested(256)), std::nullopt);
  EXPECT_EQ(pickle_structure_problem(nested(257)), "values nested more than 256 deep at byte 514 of its pickle");
  EXPECT_EQ(pickle_structure_problem(nested(200000)), "values nested more than 256 deep at byte 200257 of its pickle");
  // EMPTY_LIST BINPUT 0 BINGET 0 APPEND: a list inside itself.
  EXPECT_EQ(pickle_structure_problem("\x80\x02]q\x00h\x00"
                                     "a."s),
            "a container changed after it was placed in another (how a pickle makes a cycle) at byte 7 of its pickle");
  // L and M; L appended into M; then M appended into L through the memo: L holds M holds L.
  EXPECT_EQ(pickle_structure_problem("\x80\x02]q\x00]q\x01h\x00"
                                     "ah\x00h\x01"
                                     "a00."s),
            "a container changed after it was placed in another (how a pickle makes a cycle) at byte 15 of its pickle");
  // One list, whole, placed in two others (a shared list, as LibTorch's pickler memoizes one): not a cycle.
  EXPECT_EQ(pickle_structure_problem("\x80\x02]q\x00(K\x01"
                                     "e]h\x00"
                                     "a]h\x00"
                                     "a\x86\x86."s),
            std::nullopt);
}

TEST(PickleScan, LengthsPastTheEndAndUnknownInstructionsAreNamed) {
  // A 1.5 GB string declared in a few bytes: LibTorch would allocate it before reading.
  EXPECT_EQ(pickle_structure_problem("\x80\x02X\x00\x00\x00\x58"
                                     "abc."s),
            "a length longer than the pickle at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\x7f."s),
            "a length longer than the pickle at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02\x95\x00\x00\x00\x01\x00\x00\x00\x00."s),
            "a frame longer than the pickle at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02\xff."s), "an instruction that is not Python's at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02J\x01\x02"s), "an argument cut short at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02"
                                     "ctorch\nFloat"s),
            "a line with no end at byte 2 of its pickle");
  EXPECT_EQ(pickle_structure_problem("\x80\x02N"s), "no STOP instruction (cut short)");
  EXPECT_EQ(pickle_structure_problem(""), "no STOP instruction (cut short)");
}

// Pickle pieces, as LibTorch's pickler writes them.
std::string text(const std::string& s) {
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out += static_cast<char>((s.size() >> (8 * i)) & 0xff);
  return out + s;
}
std::string integer(int64_t v) {  // LONG1, 8 bytes
  std::string out = "\x8a\x08"s;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
  return out;
}
std::string ints(const std::vector<int64_t>& values) {
  std::string out = "(";
  for (const int64_t v : values) out += integer(v);
  return out + "t";
}
// storage `key` of `numel` floats, memoized at `memo`
std::string storage(const std::string& key, int64_t numel, char memo) {
  return "(" + text("storage") + "ctorch\nFloatStorage\n" + text(key) + text("cpu") + integer(numel) + "tQq" +
         std::string(1, memo);
}
// _rebuild_tensor_v2(<storage pushed by `storage_op`>, offset, sizes, strides, False, OrderedDict())
std::string tensor(const std::string& storage_op, int64_t offset, const std::vector<int64_t>& sizes,
                   const std::vector<int64_t>& strides) {
  return "ctorch._utils\n_rebuild_tensor_v2\n(" + storage_op + integer(offset) + ints(sizes) + ints(strides) +
         "\x89"
         "ccollections\nOrderedDict\n)Rt"
         "R"s;
}
// A module object whose state holds the tensors, as torch::serialize::OutputArchive writes it.
std::string module_of(const std::vector<std::string>& tensors) {
  std::string p =
      "\x80\x02"
      "c__torch__\nModule\n)\x81}("s;
  for (size_t i = 0; i < tensors.size(); ++i) p += text("t" + std::to_string(i)) + tensors[i];
  return p + "ub.";
}

StorageRecordSize records(std::map<std::string, uint64_t> sizes) {
  return [sizes](std::string_view key) -> std::optional<uint64_t> {
    const auto it = sizes.find(std::string(key));
    if (it == sizes.end()) return std::nullopt;
    return it->second;
  };
}

TEST(PickleScan, TensorsInsideTheirStoragesPass) {
  // Two views of one storage of 6 floats: the second reads it back from the memo.
  const std::string p = module_of({tensor(storage("0", 6, 0), 0, {2, 3}, {3, 1}), tensor("h\x00"s, 5, {1}, {1}),
                                   tensor("h\x00"s, 0, {0, 9}, {9, 1})});
  EXPECT_EQ(pickle_tensor_problem(p, records({{"0", 24}})), std::nullopt);
}

// LibTorch sets a tensor's sizes, strides and offset on its storage as the pickle says, and takes a storage's
// element count from the pickle: a few edited bytes of a checkpoint make it read memory past a record.
TEST(PickleScan, TensorsAndStoragesAreBoundedByTheirRecords) {
  const auto problem = [](const std::string& p, std::map<std::string, uint64_t> sizes = {{"0", 24}}) {
    return pickle_tensor_problem(p, records(std::move(sizes))).value_or("passed");
  };
  const auto contains = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  // A stride reaching element 6 of 6.
  EXPECT_TRUE(contains(problem(module_of({tensor(storage("0", 6, 0), 0, {2, 3}, {4, 1})})),
                       "a tensor reaching past the end of storage 0 (6 elements) at byte"));
  // An offset past the end, through the memo.
  EXPECT_TRUE(contains(problem(module_of({tensor(storage("0", 6, 0), 0, {6}, {1}), tensor("h\x00"s, 6, {1}, {1})})),
                       "past the end of storage 0"));
  // Sizes whose element count wraps 64 bits, with strides of 0.
  EXPECT_TRUE(
      contains(problem(module_of({tensor(storage("0", 6, 0), 0, {int64_t{1} << 40, int64_t{1} << 40}, {0, 0})})),
               "past the end of storage 0"));
  // More elements than the record holds, an element count whose bytes wrap, no record at all.
  EXPECT_TRUE(contains(problem(module_of({tensor(storage("0", 7, 0), 0, {7}, {1})})),
                       "storage 0 declaring 28 bytes where its record holds 24"));
  EXPECT_TRUE(contains(problem(module_of({tensor(storage("0", int64_t{1} << 62, 0), 0, {1}, {1})})),
                       "storage 0 declaring more bytes than 64 bits count"));
  EXPECT_TRUE(contains(problem(module_of({tensor(storage("0", 6, 0), 0, {6}, {1})}), {}), "storage 0 with no record"));
  // Negative strides and sizes, and as many of each.
  EXPECT_TRUE(contains(problem(module_of({tensor(storage("0", 6, 0), 5, {6}, {-1})})),
                       "sizes and strides are not as many whole numbers"));
  EXPECT_TRUE(contains(problem(module_of({tensor(storage("0", 6, 0), 0, {2, 3}, {3})})),
                       "sizes and strides are not as many whole numbers"));
  EXPECT_TRUE(contains(problem(module_of({tensor(storage("0", -1, 0), 0, {1}, {1})})),
                       "a persistent id that is not a storage's"));
  // A tensor whose first argument is not a storage.
  EXPECT_TRUE(contains(
      problem(module_of({"ctorch._utils\n_rebuild_tensor_v2\n(N" + integer(0) + ints({1}) + ints({1}) + "\x89NtR"})),
      "a tensor whose arguments are not a storage"));
}

// LibTorch's unpickler also builds quantized, sparse and subclassed tensors, unchecked; and no checkpoint of ours
// names a class from outside LibTorch's archives.
TEST(PickleScan, OnlyTheClassesOfLibTorchArchivesAreNamed) {
  EXPECT_EQ(pickle_tensor_problem("\x80\x02"
                                  "ctorch._utils\n_rebuild_qtensor\n."s,
                                  records({})),
            "a class no trainer checkpoint names (torch._utils._rebuild_qtensor) at byte 2 of its pickle");
  EXPECT_EQ(pickle_tensor_problem("\x80\x02"
                                  "cos\nsystem\n."s,
                                  records({})),
            "a class no trainer checkpoint names (os.system) at byte 2 of its pickle");
  EXPECT_EQ(pickle_tensor_problem("\x80\x02"
                                  "ctorch\nQUInt2x4Storage\n."s,
                                  records({})),
            "a class no trainer checkpoint names (torch.QUInt2x4Storage) at byte 2 of its pickle");
  EXPECT_EQ(pickle_tensor_problem("\x80\x02"
                                  "c__torch__.___torch_mangle_3\nModule\n."s,
                                  records({})),
            std::nullopt);
  // A memo entry read before it was written.
  EXPECT_EQ(pickle_tensor_problem("\x80\x02h\x05."s, records({})),
            "a memo entry read that was never stored at byte 2 of its pickle");
}

}  // namespace
}  // namespace trainer
