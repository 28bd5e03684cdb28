#include <gtest/gtest.h>

#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include "support/archive_edits.hpp"
#include "support/fixtures.hpp"
#include "trainer/config/load.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/io/archive_check.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/io/zip_records.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/optim/optimizer.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/torch_compat.hpp"

namespace trainer {
namespace {

using namespace std::string_literals;

using testing::TempDir;

struct Trained {
  ClassifierPtr model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

Trained make_trained(const Config& c, uint64_t seed) {
  torch::manual_seed(seed);
  Trained t{build_model(c.model, {12, 12, 1}), nullptr};
  t.optimizer = make_optimizer(c.optim, *t.model);
  auto x = torch::randn({4, 1, 12, 12});
  auto y = torch::tensor({0, 1, 2, 3});
  for (int i = 0; i < 2; ++i) {
    t.optimizer->zero_grad();
    torch::nn::functional::cross_entropy(t.model->forward(x), y).backward();
    t.optimizer->step();
  }
  return t;
}

Config small_config() {
  return resolve_config(nlohmann::json{{"data", {{"root", "/d"}}}, {"model", {{"num_classes", 4}}}});
}

CheckpointMeta meta_at(const Config& c, int64_t step) {
  CheckpointMeta meta;
  meta.config = config_to_json(c);
  meta.epoch = step;
  meta.step = step;
  return meta;
}

TEST(Checkpoint, RoundTripRestoresEverything) {
  TempDir dir;
  const Config c = small_config();
  Trained a = make_trained(c, 1);
  torch::manual_seed(99);
  const torch::Tensor rng_before = compat::cpu_rng_state().clone();
  CheckpointMeta meta;
  meta.config = config_to_json(c);
  meta.epoch = 3;
  meta.step = 42;
  meta.batch_in_epoch = 5;
  meta.best = 0.75;
  meta.class_names = {"a", "b", "c", "d"};
  meta.scaler = {{"enabled", true}, {"scale", 1024.0}, {"growth_tracker", 7}, {"skipped", 3}};
  meta.ema_updates = 40;
  meta.train_images = 1234;
  save_checkpoint(dir / "ck.pt", meta, {*a.model, *a.optimizer});

  torch::manual_seed(5);  // move the generator away; restore_rng must bring it back
  Trained b = make_trained(c, 2);
  const LoadedCheckpoint loaded(dir / "ck.pt");
  EXPECT_EQ(loaded.meta().epoch, 3);
  EXPECT_EQ(loaded.meta().step, 42);
  EXPECT_EQ(loaded.meta().batch_in_epoch, 5);
  EXPECT_EQ(loaded.meta().best, std::optional<double>(0.75));
  EXPECT_EQ(loaded.meta().scaler, meta.scaler);
  EXPECT_EQ(loaded.meta().ema_updates, 40);
  EXPECT_EQ(loaded.meta().train_images, 1234);
  EXPECT_EQ(loaded.meta().class_names, meta.class_names);
  EXPECT_EQ(loaded.meta().config, meta.config);
  loaded.restore_model(*b.model);
  loaded.restore_optimizer(*b.optimizer);
  loaded.restore_rng();
  EXPECT_TRUE(torch::equal(compat::cpu_rng_state(), rng_before));
  const auto pa = a.model->named_parameters(), pb = b.model->named_parameters();
  for (const auto& item : pa) EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
  // Momentum buffers: one more identical step keeps both models identical.
  auto x = torch::ones({2, 1, 12, 12});
  auto y = torch::tensor({1, 2});
  for (Trained* t : {&a, &b}) {
    t->optimizer->zero_grad();
    torch::nn::functional::cross_entropy(t->model->forward(x), y).backward();
    t->optimizer->step();
  }
  for (const auto& item : a.model->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), b.model->named_parameters()[item.key()])) << item.key();
}

// --resume auto orders a run folder's files by the step their metadata record names, read without the weights;
// anything else (not a checkpoint, a file cut short) shows no step.
TEST(Checkpoint, PeekReadsTheStepFromTheMetadataAlone) {
  TempDir dir;
  const Config c = small_config();
  Trained a = make_trained(c, 1);
  save_checkpoint(dir / "ck.pt", meta_at(c, 1234567), {*a.model, *a.optimizer});
  EXPECT_EQ(peek_checkpoint_step(dir / "ck.pt"), std::optional<int64_t>(1234567));
  testing::write_text(dir / "garbage.pt", "not a zip archive");
  EXPECT_EQ(peek_checkpoint_step(dir / "garbage.pt"), std::nullopt);
  const std::string bytes = testing::read_text(dir / "ck.pt");
  testing::write_text(dir / "cut.pt", bytes.substr(0, bytes.size() / 2));
  EXPECT_EQ(peek_checkpoint_step(dir / "cut.pt"), std::nullopt);
  EXPECT_EQ(peek_checkpoint_step(dir / "missing.pt"), std::nullopt);
  // data.pkl's directory entry declaring 4 GiB - 2 (the fuzz lane's 1,251-byte input did the same): LibTorch's
  // reader would allocate that before reading; the peek reads no record whose size is not its stored size.
  std::string huge = bytes;
  const std::string name = "archive/data.pkl";
  size_t entry = huge.find("PK\x01\x02"s);
  while (entry != std::string::npos && huge.compare(entry + 46, name.size(), name) != 0)
    entry = huge.find("PK\x01\x02"s, entry + 4);
  ASSERT_NE(entry, std::string::npos);
  huge.replace(entry + 24, 4, "\xfe\xff\xff\xff"s);
  testing::write_text(dir / "huge.pt", huge);
  EXPECT_EQ(peek_checkpoint_step(dir / "huge.pt"), std::nullopt);
  // data.pkl under a name that folds to it, as LibTorch's reader finds it: still read.
  std::string upper = bytes;
  upper.replace(upper.find(name), name.size(), "archive/DATA.pkl");
  upper.replace(upper.find(name), name.size(), "archive/DATA.pkl");  // the local header, then the directory's
  testing::write_text(dir / "upper.pt", upper);
  EXPECT_EQ(peek_checkpoint_step(dir / "upper.pt"), std::optional<int64_t>(1234567));
}

TEST(Checkpoint, RefusesToWriteANonFiniteModel) {
  TempDir dir;
  const Config c = small_config();
  Trained a = make_trained(c, 1);
  save_checkpoint(dir / "ck.pt", meta_at(c, 1), {*a.model, *a.optimizer});
  const auto before = testing::read_text(dir / "ck.pt");
  {
    torch::NoGradGuard guard;
    a.model->parameters()[0].view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  }
  EXPECT_THROW(save_checkpoint(dir / "ck.pt", meta_at(c, 2), {*a.model, *a.optimizer}), TrainError);
  EXPECT_EQ(testing::read_text(dir / "ck.pt"), before);
}

TEST(Checkpoint, GarbageOrMissingFileIsACheckpointError) {
  TempDir dir;
  testing::write_text(dir / "junk.pt", "not a checkpoint");
  EXPECT_THROW(LoadedCheckpoint(dir / "junk.pt"), CheckpointError);
  EXPECT_THROW(LoadedCheckpoint(dir / "missing.pt"), CheckpointError);
}

TEST(Checkpoint, WeightsForAnotherModelShapeAreRefused) {
  TempDir dir;
  const Config c = small_config();
  Trained a = make_trained(c, 1);
  save_checkpoint(dir / "ck.pt", meta_at(c, 1), {*a.model, *a.optimizer});
  Config other = c;
  other.model.num_classes = 7;
  auto model = build_model(other.model, {12, 12, 1});
  EXPECT_THROW(LoadedCheckpoint(dir / "ck.pt").restore_model(*model), CheckpointError);
}

// A checkpoint edited on purpose, its CRC-32s made to match: the first tensor's first stride made to reach past its
// storage, which LibTorch would take as written and read memory beyond the record with. Refused, naming the record,
// before LibTorch is given the file.
TEST(Checkpoint, ATensorReachingPastItsStorageIsRefused) {
  TempDir dir;
  const Config c = small_config();
  Trained a = make_trained(c, 1);
  save_checkpoint(dir / "ck.pt", meta_at(c, 1), {*a.model, *a.optimizer});
  const std::string edited = testing::with_first_stride_widened(testing::read_text(dir / "ck.pt"));
  ASSERT_FALSE(edited.empty());
  testing::write_text(dir / "edited.pt", edited);
  try {
    LoadedCheckpoint checkpoint(dir / "edited.pt");
    FAIL() << "the edited checkpoint was opened";
  } catch (const CheckpointError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("edited.pt: not a trainer checkpoint or damaged (record "), std::string::npos) << message;
    EXPECT_NE(message.find("data.pkl: a tensor reaching past the end of storage 0 "), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // The same file as written opens.
  EXPECT_NO_THROW(LoadedCheckpoint checkpoint(dir / "ck.pt"));
}

// An archive holding one code record, as LibTorch's writer stores it.
std::string archive_with_code(const std::string& source) {
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  writer.writeRecord("code/__torch__/___torch_mangle_7.py", source.data(), source.size());
  writer.writeEndOfFile();
  return bytes;
}

// LibTorch compiles an archive's code as it loads it, and its compiler crashes on some source; a checkpoint's code
// declares attributes only, and anything else is refused before LibTorch sees it.
TEST(Checkpoint, CodeOtherThanAttributeDeclarationsIsRefused) {
  const std::string declared =
      "class Module(Module):\n"
      "  __parameters__ = [\"weight\", \"params/size\", ]\n"
      "  __buffers__ = []\n"
      "  __annotations__ = []\n"
      "  __annotations__[\"0x558aac766690\"] = __torch__.___torch_mangle_14.Module\n"
      "  weight : Tensor\n"
      "  betas : Tuple[float, float]\n"
      "  step : int\n"
      "\n";
  const auto problem = [](const std::string& source) {
    const std::string bytes = archive_with_code(source);
    return archive_code_problem(bytes.data(), bytes.size());
  };
  EXPECT_EQ(problem(declared), std::nullopt);
  for (const char* line :
       {"  out_features : Final[int] = 2", "  def forward(self, x: Tensor) -> Tensor:", "  betas : Tuple[float, float",
        "  __annotations__[\"a\\\"b\"] = Tensor", "  _lbarameters__ = [\"weight\", ]", "  weight : NoneType",
        "import os", "  weight : List[float, float]"}) {
    const auto refused = problem(declared + line + "\n");
    ASSERT_TRUE(refused.has_value()) << line;
    EXPECT_EQ(*refused,
              "record archive/code/__torch__/___torch_mangle_7.py: line 10 is not a class attribute as a "
              "checkpoint declares it")
        << line;
  }
}

// Every record of a LibTorch archive against its zip CRC-32: a flipped byte anywhere in a record is found and
// named; a file cut short has no directory.
TEST(ZipRecords, AFlippedByteInAnyRecordIsFound) {
  TempDir dir;
  torch::serialize::OutputArchive archive;
  archive.write("a", torch::arange(1000, torch::kFloat));
  archive.write("b", torch::ones({300}, torch::kDouble));
  archive.save_to((dir / "x.pt").string());
  std::string bytes = testing::read_text(dir / "x.pt");
  EXPECT_EQ(first_damaged_record(bytes.data(), bytes.size()), std::nullopt);
  const size_t at =
      bytes.find(std::string(reinterpret_cast<const char*>(torch::arange(1000, torch::kFloat).data_ptr()), 64));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 100] ^= 0x40;
  const auto damaged = first_damaged_record(bytes.data(), bytes.size());
  ASSERT_TRUE(damaged.has_value());
  EXPECT_NE(damaged->find("does not match its CRC-32"), std::string::npos) << *damaged;
  EXPECT_EQ(first_damaged_record(bytes.data(), bytes.size() / 2), "no zip directory (not an archive, or cut short)");
}

// LibTorch's reader takes the directory from the zip64 end record that its writer puts in every archive: an end
// record edited to list no records must not hide them from the CRC check and the pickle walk.
TEST(ZipRecords, TheDirectoryIsTheOneLibTorchReads) {
  TempDir dir;
  torch::serialize::OutputArchive archive;
  archive.write("a", torch::arange(1000, torch::kFloat));
  archive.save_to((dir / "x.pt").string());
  std::string bytes = testing::read_text(dir / "x.pt");
  const size_t records = zip_records(bytes.data(), bytes.size()).size();
  ASSERT_GE(records, 3u);  // data.pkl, the tensor, version, ...
  const size_t end = bytes.rfind("PK\x05\x06"s);
  ASSERT_NE(end, std::string::npos);
  ASSERT_EQ(bytes.substr(end - 20, 4), "PK\x06\x07"s) << "no zip64 locator";
  bytes.replace(end + 8, 4, 4, '\0');  // the end record's two counts: 0 records
  EXPECT_EQ(zip_records(bytes.data(), bytes.size()).size(), records);
  const size_t at =
      bytes.find(std::string(reinterpret_cast<const char*>(torch::arange(1000, torch::kFloat).data_ptr()), 64));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 8] ^= 0x01;
  const auto damaged = first_damaged_record(bytes.data(), bytes.size());
  ASSERT_TRUE(damaged.has_value());
  EXPECT_NE(damaged->find("does not match its CRC-32"), std::string::npos) << *damaged;
  // A zip64 record whose counts disagree with each other is damage, as the reader has it.
  const size_t zip64 = bytes.rfind("PK\x06\x06"s);
  ASSERT_NE(zip64, std::string::npos);
  bytes[zip64 + 24] ^= 0x01;  // the records on this disk
  EXPECT_EQ(first_damaged_record(bytes.data(), bytes.size()), "damaged zip directory");
}

}  // namespace
}  // namespace trainer
