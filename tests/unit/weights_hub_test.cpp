// The pieces of model.weights that need no network: SHA-256, torch.hub's file-name rules and cache folder, and
// locating and loading start weights (names, addresses, files; the replaced classifier).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "support/fixtures.hpp"
#include "trainer/engine/start_weights.hpp"
#include "trainer/io/safetensors.hpp"
#include "trainer/io/weights_hub.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/sha256.hpp"

namespace trainer {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::string sha256_of(const std::string& text) {
  Sha256 h;
  h.update(text.data(), text.size());
  return h.hex_digest();
}

TEST(Sha256, MatchesTheStandardsVectors) {
  EXPECT_EQ(sha256_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a's fed in uneven pieces: block boundaries fall inside updates.
  Sha256 h;
  const std::string piece(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, piece.size());
    h.update(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(WeightsHub, HashPrefixFollowsTorchHubsRule) {
  EXPECT_EQ(hub_hash_prefix("resnet50-11ad3fa6.pth"), "11ad3fa6");
  EXPECT_EQ(hub_hash_prefix("wide_resnet50_2-9ba9bcbe.pth"), "9ba9bcbe");
  EXPECT_EQ(hub_hash_prefix("my-model-0123abcd.pth"), "0123abcd");  // "-model-" is no hex run before a '.'
  EXPECT_EQ(hub_hash_prefix("weights.pth"), "");
  EXPECT_EQ(hub_hash_prefix("model-ABCDEF.pth"), "");  // upper case is not torch.hub's hex
}

TEST(WeightsHub, AddressFileNameAndCacheFolder) {
  EXPECT_EQ(address_file_name("https://host/models/r-1a2b.pth?token=x#f"), "r-1a2b.pth");
  EXPECT_THROW(address_file_name("https://host/models/"), ConfigError);
  EXPECT_THROW(address_file_name("https://host"), ConfigError);
  EXPECT_THROW(address_file_name("https://host/m/.."), ConfigError);
  EXPECT_THROW(address_file_name("https://host/m/..\\..\\x.pth"), ConfigError);
  EXPECT_THROW(address_file_name("https://host/m/C:x.pth"), ConfigError);
  EXPECT_TRUE(is_address("http://h/x.pth") && is_address("https://h/x.pth") && is_address("file:///x.pth"));
  EXPECT_FALSE(is_address("runs/x.pth"));
  EXPECT_EQ(hub_cache_dir("/t", "/x", "/home/u"), fs::path("/t/hub/checkpoints"));
  EXPECT_EQ(hub_cache_dir("", "/x", "/home/u"), fs::path("/x/torch/hub/checkpoints"));
  EXPECT_EQ(hub_cache_dir("", "", "/home/u"), fs::path("/home/u/.cache/torch/hub/checkpoints"));
}

ModelConfig small_resnet(int64_t classes) {
  ModelConfig m;
  m.arch = "resnet18";
  m.in_channels = 1;
  m.stem = StemKind::small;
  m.num_classes = classes;
  return m;
}

TEST(StartWeights, NamesResolveInTheCacheAndBadSpecsSayWhatIsValid) {
  TempDir dir;
  WeightsHub hub{dir / "cache", "", nullptr};
  fs::create_directories(hub.cache_dir);
  testing::write_text(hub.cache_dir / "resnet50-11ad3fa6.pth", "x");
  ModelConfig m;
  m.arch = "resnet50";
  for (const std::string name : {"IMAGENET1K_V2", "DEFAULT"}) {
    m.weights = name;
    EXPECT_EQ(locate_start_weights(m, hub).file, hub.cache_dir / "resnet50-11ad3fa6.pth") << name;
  }
  m.weights = "IMAGENET1K_V9";
  try {
    locate_start_weights(m, hub);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("IMAGENET1K_V1, IMAGENET1K_V2, DEFAULT"), std::string::npos) << e.what();
  }
  m.weights = (dir / "nothing.pth").string();
  EXPECT_THROW(locate_start_weights(m, hub), WeightsError);
  m.init_from = "a.pth";
  EXPECT_THROW(locate_start_weights(m, hub), ConfigError);  // both set
  m.weights.clear();
  m.init_from.clear();
  EXPECT_TRUE(locate_start_weights(m, hub).empty());
}

TEST(StartWeights, AnotherTasksClassifierIsReplacedAndEverythingElseLoaded) {
  TempDir dir;
  torch::manual_seed(1);
  auto imagenet = build_model(small_resnet(1000), {28, 28, 1});
  write_safetensors(dir / "w.safetensors", model_state(*imagenet), {});
  torch::manual_seed(2);
  auto mine = build_model(small_resnet(7), {28, 28, 1});
  const torch::Tensor fresh_fc = mine->named_parameters()["fc.weight"].clone();
  std::string said;
  const WeightsReport r = load_start_weights(*mine, small_resnet(7), {dir / "w.safetensors", "test", true},
                                             [&](const std::string& s) { said += s; });
  EXPECT_EQ(said,
            "the weights' classifier has 1000 classes, this run 7: fc.weight, fc.bias replaced, freshly "
            "initialised");
  EXPECT_TRUE(r.unused_patterns.empty());
  EXPECT_TRUE(torch::equal(mine->named_parameters()["fc.weight"], fresh_fc));
  EXPECT_TRUE(torch::equal(mine->named_parameters()["layer4.1.conv2.weight"],
                           imagenet->named_parameters()["layer4.1.conv2.weight"]));
  // The same classes: the classifier is taken too.
  auto same = build_model(small_resnet(1000), {28, 28, 1});
  said.clear();
  load_start_weights(*same, small_resnet(1000), {dir / "w.safetensors", "test", true},
                     [&](const std::string& s) { said += s; });
  EXPECT_EQ(said, "");
  EXPECT_TRUE(torch::equal(same->named_parameters()["fc.weight"], imagenet->named_parameters()["fc.weight"]));
}

}  // namespace
}  // namespace trainer
