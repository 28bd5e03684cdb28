// The pickle machine under the .pth reader, fed hand-built hostile pickles, as the safetensors reader is fed
// hostile headers: each is a one-line WeightsError naming the file, never a crash, a cycle or an unbounded
// allocation. tests/fuzz/pickle_fuzz.cpp runs it on generated ones.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

using namespace std::string_literals;

#include "trainer/io/state_dict_pickle.hpp"
#include "trainer/util/error.hpp"

namespace trainer {
namespace {

std::string refusal(const std::string& pickle) {
  const auto storage = [](const std::string&, torch::Dtype dtype, int64_t numel) {
    return torch::zeros({numel}, torch::TensorOptions().dtype(dtype));
  };
  try {
    unpickle_state_dict("h.pth"s, pickle, storage);
  } catch (const WeightsError& e) {
    return e.message();
  }
  return "no error"s;
}

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

const std::string kProto = "\x80\x02"s;

TEST(StatePickle, AWellFormedDictReads) {
  // {"a": [1, 2.5, None], "b": (True,)}
  const std::string pickle = kProto +
                             "}(X\x01\x00\x00\x00"
                             "a](K\x01G\x40\x04\x00\x00\x00\x00\x00\x00Ne"s +
                             "X\x01\x00\x00\x00"
                             "b\x88\x85u."s;
  const auto storage = [](const std::string&, torch::Dtype, int64_t) -> torch::Tensor { throw WeightsError("no"s); };
  const PickleValuePtr top = unpickle_state_dict("h.pth"s, pickle, storage);
  ASSERT_EQ(top->kind, PickleValue::Kind::dict);
  ASSERT_EQ(top->entries.size(), 2u);
  EXPECT_EQ(top->entries[0].first->text, "a"s);
  const auto& list = *top->entries[0].second;
  ASSERT_EQ(list.items.size(), 3u);
  EXPECT_EQ(list.items[0]->integer, 1);
  EXPECT_EQ(list.items[1]->real, 2.5);
  EXPECT_EQ(list.items[2]->kind, PickleValue::Kind::none);
  EXPECT_EQ(top->entries[1].second->items[0]->kind, PickleValue::Kind::boolean);
  EXPECT_EQ(top->nesting, 2u);
}

TEST(StatePickle, BrokenMachinesAreNamed) {
  EXPECT_EQ(refusal(kProto + "\xff"s),
            "h.pth: an unsupported pickle instruction 0xff in data.pkl, which a state dict does not hold"s);
  EXPECT_EQ(refusal(kProto + "X\xff\xff\xff\xff"s + "ab"s), "h.pth: data.pkl ends early (truncated or damaged)"s);
  EXPECT_EQ(refusal(kProto), "h.pth: data.pkl ends early (truncated or damaged)"s);
  EXPECT_EQ(refusal(kProto + "."s),
            "h.pth: a malformed pickle (empty stack) in data.pkl, which a state dict does not hold"s);
  EXPECT_EQ(refusal(kProto + "h\x05."s),
            "h.pth: a reference to an unknown memo entry in data.pkl, which a state dict does not hold"s);
  EXPECT_EQ(refusal(kProto + "\x8a\x09"s + std::string(9, '\x01') + "."s),
            "h.pth: an integer wider than 64 bits in data.pkl, which a state dict does not hold"s);
  EXPECT_EQ(refusal(kProto + "K\x01K\x02"
                             "a."s),
            "h.pth: an append to something other than a list in data.pkl, which a state dict does not hold"s);
  EXPECT_EQ(refusal(kProto + "cos\nsystem\n."s),
            "h.pth: holds a Python object of class os.system, which is not read (only tensors, dicts, lists, numbers "
            "and strings are, and nothing in the file is run); save the state dict alone: "
            "torch.save(model.state_dict(), path)"s);
}

// A list appended into itself through the memo is a cycle that reference counting never frees; a state dict
// never refers to a container twice.
TEST(StatePickle, AContainerReferredToTwiceIsRefused) {
  EXPECT_EQ(refusal(kProto + "]q\x00h\x00"
                             "a."s),
            "h.pth: a second reference to a list, tuple or dict in data.pkl, which a state dict does not hold"s);
  EXPECT_EQ(refusal(kProto + "}q\x01"s + "K\x01h\x01s."s),
            "h.pth: a second reference to a list, tuple or dict in data.pkl, which a state dict does not hold"s);
  // Strings, numbers and class names may be shared, as torch.save shares them.
  EXPECT_EQ(refusal(kProto + "}X\x01\x00\x00\x00kq\x02h\x02s."s), "no error"s);
}

// Nesting deep enough to overflow the stack when the values are destroyed, and more values than any state dict
// holds, stop at their bounds.
TEST(StatePickle, NestingAndValueCountAreBounded) {
  EXPECT_EQ(refusal(kProto + repeat("]"s, 64) + repeat("a"s, 63) + "."s), "no error"s);
  EXPECT_EQ(refusal(kProto + repeat("]"s, 66) + repeat("a"s, 65) + "."s),
            "h.pth: values nested more than 64 deep in data.pkl, which a state dict does not hold"s);
  EXPECT_EQ(refusal(kProto + repeat("("s, 100000) + repeat("t"s, 100000) + "."s),
            "h.pth: values nested more than 64 deep in data.pkl, which a state dict does not hold"s);
  EXPECT_EQ(refusal(kProto + "]"s + repeat("Na"s, (size_t{1} << 20) + 1) + "."s),
            "h.pth: more than 1048576 values in data.pkl, which a state dict does not hold"s);
}

// A tensor's persistent id, sizes and strides are checked for kind before they are used.
TEST(StatePickle, TensorArgumentsOfTheWrongKindAreRefused) {
  const std::string text_storage = "X\x07\x00\x00\x00storage"s;
  const std::string id_head = "("s + text_storage +
                              "ctorch\nFloatStorage\nX\x01\x00\x00\x00"
                              "0X\x03\x00\x00\x00"
                              "cpu"s;
  // The element count as text.
  EXPECT_EQ(refusal(kProto + id_head +
                    "X\x01\x00\x00\x00"
                    "4tQ."s),
            "h.pth: a reference to something other than a tensor storage in data.pkl, which a state dict does not "
            "hold"s);
  // 'storage' as a number.
  EXPECT_EQ(refusal(kProto + "(K\x01"
                             "ctorch\nFloatStorage\nX\x01\x00\x00\x00"
                             "0X\x03\x00\x00\x00"
                             "cpuK\x04tQ."s),
            "h.pth: a reference to something other than a tensor storage in data.pkl, which a state dict does not "
            "hold"s);
  const std::string storage = id_head + "K\x04tQ"s;
  const std::string rebuild = "ctorch._utils\n_rebuild_tensor_v2\n("s + storage + "K\x00"s;
  // A size given as True.
  EXPECT_EQ(refusal(kProto + rebuild + "\x88\x85K\x01\x85\x89)tR."s),
            "h.pth: a tensor size or stride that is not a whole number >= 0 in data.pkl, which a state dict does "
            "not hold"s);
  // 65 dimensions.
  EXPECT_EQ(refusal(kProto + rebuild + "("s + repeat("K\x01"s, 65) + "t("s + repeat("K\x01"s, 65) + "t\x89)tR."s),
            "h.pth: a tensor of more than 64 dimensions in data.pkl, which a state dict does not hold"s);
  EXPECT_EQ(refusal(kProto + rebuild + "K\x02\x85K\x01\x85\x89)tR."s), "no error"s);
}

}  // namespace
}  // namespace trainer
