// WebDataset shards as a user meets them: `trainer shards make` packs the test folder (the same bytes every time),
// `shards check` passes it and catches damage, and training on the shards, on disk or from a loopback HTTP server
// that drops connections, ends with the folder run's weights bit for bit; a mid-epoch stop resumes exactly on one
// process and on two; a shard that answers 404 is a counted bad sample, or past the limit a one-line error.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "e2e/e2e_support.hpp"
#include "support/image_folder_fixture.hpp"
#include "trainer/data/sources/shard_source.hpp"
#include "trainer/data/sources/tar_members.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/io/checkpoint.hpp"
#include "trainer/models/factory.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/http_range.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;
using nlohmann::json;

// A checkpoint's parameters and buffers, by name.
std::map<std::string, torch::Tensor> weights(const fs::path& checkpoint, const ImageShape& input) {
  const LoadedCheckpoint ck(checkpoint);
  auto model = build_model(resolve_config(ck.meta().config).model, input);
  ck.restore_model(*model);
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : model->named_parameters()) out[p.key()] = p.value();
  for (const auto& b : model->named_buffers()) out[b.key()] = b.value();
  return out;
}

void expect_same_weights(const fs::path& a, const fs::path& b, const ImageShape& input) {
  const auto wa = weights(a, input), wb = weights(b, input);
  ASSERT_EQ(wa.size(), wb.size());
  for (const auto& [name, value] : wa) EXPECT_TRUE(torch::equal(value, wb.at(name))) << name << ": " << b;
}

// The folder, its shards (about 4 KB each, so a split spans several), and a config for each.
struct ShardedFolder {
  TempDir dir;
  fs::path folder = dir / "imagenet", shards = dir / "shards";
  explicit ShardedFolder(ImageFolderSpec spec = {}) {
    write_image_folder(folder, spec);
    const auto made = trainer_cli("shards make " + folder.string() + " " + shards.string() + " --shard-mb 0.004");
    EXPECT_EQ(made.exit_code, 0) << made.output;
  }
  // small_folder_config with mnist_cnn on 28 px crops (a second a run); on the shards at `root` unless it is empty.
  fs::path config(const std::string& name, const std::string& root, json overrides = json::object()) const {
    json c = small_folder_config(folder);
    c.merge_patch({{"data", {{"augment", {{"image_size", 28}}}}},
                   {"model", {{"arch", "mnist_cnn"}, {"in_channels", 3}, {"stem", nullptr}}}});
    if (!root.empty()) c["data"]["kind"] = "shards", c["data"]["root"] = root;
    c.merge_patch(overrides);
    write_text(dir / (name + ".json"), c.dump(2));
    return dir / (name + ".json");
  }
};

std::string bytes_of(const fs::path& p) { return read_text(p); }

// The run of `config` (trainer's arguments) straight through, in f.dir/straight, and stopped after its second step,
// in f.dir/stopped.
void run_straight_and_stopped(const ShardedFolder& f, const std::string& config) {
  const auto straight = trainer_cli(config + " -o " + (f.dir / "straight").string());
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto stopped = trainer_cli(config + " -o " + (f.dir / "stopped").string() + " --stop-after-step 2");
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
}

TEST(Shards, PackedFromAFolderTheyTrainToTheFolderRunsWeightsOnDiskAndOverHttp) {
  ShardedFolder f;
  // The same folder makes the same bytes.
  ASSERT_EQ(trainer_cli("shards make " + f.folder.string() + " " + (f.dir / "again").string() + " --shard-mb 0.004")
                .exit_code,
            0);
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(f.shards)) {
    ++files;
    EXPECT_EQ(bytes_of(entry.path()), bytes_of(f.dir / "again" / entry.path().filename())) << entry.path();
  }
  EXPECT_GT(files, 7u);  // shards.json, and at least three shards with their indexes
  const auto over = trainer_cli("shards make " + f.folder.string() + " " + f.shards.string());
  EXPECT_EQ(over.exit_code, 2) << over.output;
  EXPECT_NE(over.output.find("error: usage: " + f.shards.string() + " already holds shards ("), std::string::npos)
      << over.output;
  const auto check = trainer_cli("shards check " + f.shards.string());
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find(" with problems, 18 samples in shards.json"), std::string::npos) << check.output;

  const auto folder_run = trainer_cli("--config " + f.config("folder", "").string() + " -o " + (f.dir / "a").string());
  ASSERT_EQ(folder_run.exit_code, 0) << folder_run.output;
  const auto disk =
      trainer_cli("--config " + f.config("disk", f.shards.string()).string() + " -o " + (f.dir / "b").string());
  ASSERT_EQ(disk.exit_code, 0) << disk.output;
  EXPECT_NE(disk.output.find("shards, 12 images, 3 classes; random resized crop 28, flip, reduced JPEG decode)"),
            std::string::npos)
      << disk.output;
  expect_same_weights(f.dir / "a" / "last.pt", f.dir / "b" / "last.pt", {28, 28, 3});

  // Over HTTP, every fifth range answer cut halfway: the reads are retried and the run is the same.
  WeightsServer server(f.dir.path(), "--cut-every 5");
  fs::remove_all(server.root());
  fs::copy(f.shards, server.root(), fs::copy_options::recursive);
  const auto http =
      trainer_cli("--config " + f.config("http", server.address("")).string() + " -o " + (f.dir / "c").string());
  ASSERT_EQ(http.exit_code, 0) << http.output;
  expect_same_weights(f.dir / "a" / "last.pt", f.dir / "c" / "last.pt", {28, 28, 3});
  // One request for the summary per split and one per index; then only ranges (image members, never a whole shard).
  const std::string log = server.requests();
  size_t ranges = 0, whole = 0;
  for (size_t at = 0; (at = log.find("GET ", at)) != std::string::npos; ++at)
    (log.compare(log.find("range=", at) + 6, 1, "-") == 0 ? whole : ranges) += 1;
  EXPECT_EQ(whole, 2 + (files - 1) / 2) << log;
  EXPECT_GE(ranges, 36u) << log;  // 12 train images x 2 epochs + 6 val x 2, and the retries of the cut ones
  EXPECT_EQ(log.find(".tar range=-"), std::string::npos) << log;
  // doctor opens the shards (every index read), times their reads as it times a disk, and decodes a sample.
  const auto doctor =
      trainer_cli("doctor --config " + (f.dir / "http.json").string() + " -o " + (f.dir / "d").string());
  EXPECT_EQ(doctor.exit_code, 0) << doctor.output;
  EXPECT_NE(doctor.output.find("read 12 files in "), std::string::npos) << doctor.output;
  EXPECT_NE(doctor.output.find("12/12 sampled images read"), std::string::npos) << doctor.output;

  // Without shards.json and without indexes (the server answers 404) the splits are the patterns given, each shard
  // is read through once to list its samples, and the labels are the shards' .cls members: the same run again.
  fs::remove(server.root() / "shards.json");
  for (const auto& e : fs::directory_iterator(f.shards))
    if (e.path().extension() == ".idx") fs::remove(server.root() / e.path().filename());
  size_t train_shards = 0, val_shards = 0;
  for (const auto& e : fs::directory_iterator(server.root()))
    if (e.path().extension() == ".tar")
      (e.path().filename().string().rfind("train-", 0) == 0 ? train_shards : val_shards)++;
  ASSERT_TRUE(train_shards > 0 && val_shards > 0);
  auto range = [](const std::string& split, size_t count) {  // train-{000000..000011}.tar
    char last[24];                                           // any size_t, so no compiler sees a truncation
    std::snprintf(last, sizeof last, "%06zu", count - 1);
    return split + "-{000000.." + last + "}.tar";
  };
  const fs::path cache = f.dir / "cache";
  const json patterns{
      {"data",
       {{"shards",
         {{"train", range("train", train_shards)}, {"val", range("val", val_shards)}, {"cache", cache.string()}}}}}};
  const std::string bare_config = "--config " + f.config("bare", server.address(""), patterns).string();
  const auto bare = trainer_cli(bare_config + " -o " + (f.dir / "bare").string());
  ASSERT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_NE(bare.output.find(" shards, " + std::to_string(train_shards) +
                             " without an index, read through once to list their samples ("),
            std::string::npos)
      << bare.output;
  expect_same_weights(f.dir / "a" / "last.pt", f.dir / "bare" / "last.pt", {28, 28, 3});
  // The reads left each shard's listing in the cache: a later start reads those instead of the shards (one request
  // for a shard's first byte, its version), and trains the same.
  const size_t before = server.requests().size();
  const auto listed = trainer_cli(bare_config + " -o " + (f.dir / "listed").string());
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find(" shards, " + std::to_string(train_shards) +
                               " without an index, listed by an earlier start's read (in " + cache.string() + "), "),
            std::string::npos)
      << listed.output;
  EXPECT_EQ(server.requests().find(".tar range=-", before), std::string::npos) << server.requests().substr(before);
  expect_same_weights(f.dir / "a" / "last.pt", f.dir / "listed" / "last.pt", {28, 28, 3});
  size_t listings = 0;
  for (const auto& e : fs::directory_iterator(cache)) listings += e.path().extension() == ".listing";
  EXPECT_EQ(listings, train_shards + val_shards);

  // Damage `shards check` finds: a flipped byte in a header.
  std::string tar = bytes_of(f.shards / "train-000001.tar");
  tar[600] ^= 1;          // inside the first member's bytes: the tar still reads, the image's header does not
  tar[512 * 0 + 3] ^= 1;  // the first header's name: its checksum no longer matches
  write_text(f.shards / "train-000001.tar", tar);
  const auto bad = trainer_cli("shards check " + f.shards.string());
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find((f.shards / "train-000001.tar").string() + ": tar header at offset 0: checksum "),
            std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("1 with problems"), std::string::npos) << bad.output;
}

// The read-ahead (data.shards.read_ahead) against the loopback server: the images of a planned batch, fetched by
// threads of their own, are the shard's bytes, each range fetched once; with 0 the workers fetch their own.
TEST(Shards, RemoteImagesFetchedAheadAreTheShardsBytesEachRangeFetchedOnce) {
  ShardedFolder f;
  WeightsServer server(f.dir.path());
  fs::remove_all(server.root());
  fs::copy(f.shards, server.root(), fs::copy_options::recursive);
  DataConfig local;
  local.kind = DataKind::shards;
  local.root = f.shards.string();
  DataConfig remote = local;
  remote.root = server.address("");
  const auto disk = open_shards(local, /*train=*/true, 0, 3);
  const auto http = open_shards(remote, /*train=*/true, 0, 3);
  ASSERT_EQ(http->size(), 12u);
  const size_t opening = server.requests().size();  // shards.json and the indexes
  std::vector<size_t> all;
  for (size_t i = 0; i < http->size(); ++i) all.push_back(i);
  http->prefetch(all);
  ASSERT_TRUE(eventually([&] { return http->read_ahead_counts().fetched == all.size(); }));
  std::vector<uint8_t> a, b;
  for (size_t i : all) {
    ASSERT_TRUE(disk->read_encoded(i, a) && http->read_encoded(i, b));
    EXPECT_EQ(a, b) << i;
  }
  const ReadAhead::Counts c = http->read_ahead_counts();
  EXPECT_EQ(c.taken, 12u);
  EXPECT_EQ(c.missed + c.failed + c.evicted, 0u);
  const std::string fetched = server.requests().substr(opening);
  std::set<std::string> ranges;
  size_t lines = 0;
  for (size_t at = 0, end; (end = fetched.find('\n', at)) != std::string::npos; at = end + 1, ++lines) {
    EXPECT_NE(fetched.find(" range=bytes=", at), std::string::npos) << fetched;
    ranges.insert(fetched.substr(at, end - at));
  }
  EXPECT_EQ(lines, 12u) << fetched;  // one range per image, none twice
  EXPECT_EQ(ranges.size(), 12u) << fetched;

  remote.shards.read_ahead = 0;
  const auto own = open_shards(remote, /*train=*/true, 0, 3);
  own->prefetch(all);
  for (size_t i : all) {
    ASSERT_TRUE(disk->read_encoded(i, a) && own->read_encoded(i, b));
    EXPECT_EQ(a, b) << i;
  }
  EXPECT_EQ(own->read_ahead_counts().requested, 0u);
  // Local shards are read where they lie: nothing is fetched ahead.
  disk->prefetch(all);
  EXPECT_EQ(disk->read_ahead_counts().requested, 0u);
}

// Remote shards without indexes, read through at opening: a connection cut mid-shard is resumed where it stopped
// (a range from that byte on) and lists the same samples with the same bytes; a damaged header is a one-line error
// naming the shard and offset.
TEST(Shards, AShardWithoutIndexIsReadThroughResumedAfterACutAndCheckedAsItArrives) {
  ShardedFolder f;
  WeightsServer server(f.dir.path(), "--cut-first 3000");  // the first whole-file answer stops after 3000 bytes
  fs::remove_all(server.root());
  fs::create_directories(server.root());
  fs::copy(f.shards / "train-000000.tar", server.root() / "train-000000.tar");
  fs::copy(f.shards / "train-000001.tar", server.root() / "train-000001.tar");
  DataConfig local;
  local.kind = DataKind::shards;
  local.root = f.shards.string();
  local.shards.train = "train-{000000..000001}.tar";
  DataConfig remote = local;
  remote.root = server.address("");
  remote.shards.cache = (f.dir / "cache").string();
  const auto disk = open_shards(local, /*train=*/true, 3, 3);
  const auto http = open_shards(remote, /*train=*/true, 3, 3);
  ASSERT_EQ(http->size(), disk->size());
  EXPECT_NE(http->describe().find("(2 shards, 2 without an index, read through once"), std::string::npos)
      << http->describe();
  std::vector<uint8_t> a, b;
  for (size_t i = 0; i < disk->size(); ++i) {
    ASSERT_TRUE(disk->read_encoded(i, a) && http->read_encoded(i, b));
    EXPECT_EQ(a, b) << i;
    EXPECT_EQ(http->label(i), disk->label(i)) << i;
  }
  EXPECT_NE(server.requests().find(".tar range=bytes=3000-\n"), std::string::npos) << server.requests();
  // Opening asked for the indexes, the summary, each shard's first byte (its version, for the listing) and the shards,
  // and resumed one: the labels came with the shards' bytes, with no range request each; the reads above were the
  // only others.
  const auto closed_ranges = [&](size_t from) {
    const std::string log = server.requests();
    size_t closed = 0;
    for (size_t at = from; (at = log.find("range=bytes=", at)) != std::string::npos; ++at)
      closed += log.compare(log.find('\n', at) - 1, 1, "-") != 0 && log.compare(at, 16, "range=bytes=0-0\n") != 0;
    return closed;
  };
  EXPECT_EQ(closed_ranges(0), disk->size()) << server.requests();  // one per image read above, none for a label
  const std::string log = server.requests();
  size_t first_bytes = 0;
  for (size_t at = 0; (at = log.find("range=bytes=0-0\n", at)) != std::string::npos; ++at) ++first_bytes;
  EXPECT_EQ(first_bytes, 2u) << log;

  // A second opening reads the listings the first left in the cache: the same samples, labels and bytes, without a
  // whole-shard request or a label's range.
  const size_t before = server.requests().size();
  const auto listed = open_shards(remote, /*train=*/true, 3, 3);
  EXPECT_NE(listed->describe().find("(2 shards, 2 without an index, listed by an earlier start's read (in "),
            std::string::npos)
      << listed->describe();
  ASSERT_EQ(listed->size(), disk->size());
  for (size_t i = 0; i < disk->size(); ++i) {
    ASSERT_TRUE(disk->read_encoded(i, a) && listed->read_encoded(i, b));
    EXPECT_EQ(a, b) << i;
    EXPECT_EQ(listed->label(i), disk->label(i)) << i;
  }
  EXPECT_EQ(server.requests().find(".tar range=-", before), std::string::npos) << server.requests().substr(before);
  EXPECT_EQ(closed_ranges(before), disk->size()) << server.requests().substr(before);

  // A server that sends no validators (neither ETag nor Last-Modified) gets no listing: nothing tells a later start
  // that its shard is the same.
  {
    WeightsServer plain(f.dir / "plain", "--no-validators");
    fs::copy(server.root() / "train-000000.tar", plain.root() / "train-000000.tar");
    fs::copy(server.root() / "train-000001.tar", plain.root() / "train-000001.tar");
    DataConfig d = remote;
    d.root = plain.address("");
    d.shards.cache = (f.dir / "plain-cache").string();
    for (int start = 0; start < 2; ++start)
      EXPECT_NE(open_shards(d, true, 3, 3)->describe().find("(2 shards, 2 without an index, read through once"),
                std::string::npos);
    EXPECT_FALSE(fs::exists(f.dir / "plain-cache"));
  }
  // A shard replaced while it was read through (its modification time moved on after the cut): the resumed answer
  // has other validators, and the read fails rather than joining two files' bytes.
  {
    WeightsServer moving(f.dir / "moving", "--cut-first 3000 --touch-after-cut");
    fs::copy(server.root() / "train-000000.tar", moving.root() / "train-000000.tar");
    DataConfig d = remote;
    d.root = moving.address("");
    d.shards.train = "train-000000.tar";
    d.shards.cache = (f.dir / "moving-cache").string();
    EXPECT_NE(testing::error_of<DataError>([&] { open_shards(d, true, 3, 3); })
                  .find("data: " + moving.address("train-000000.tar") +
                        ": reading it through, at byte 3000: the file changed while it was read (first "),
              std::string::npos);
  }

  // A damaged shard on the server (so another version: its listing is not used) is read through again, and fails.
  std::string tar = bytes_of(server.root() / "train-000001.tar");
  const auto members = list_tar_members(reinterpret_cast<const uint8_t*>(tar.data()), tar.size(), "t");
  ASSERT_GT(members.size(), 1u);
  const uint64_t second = members[1].offset - 512;
  tar[second + 3] ^= 1;  // the second member's header: its checksum no longer matches
  write_text(server.root() / "train-000001.tar", tar);
  EXPECT_NE(testing::error_of<DataError>([&] { open_shards(remote, true, 3, 3); })
                .find("data: " + server.address("train-000001.tar") + ": tar header at offset " +
                      std::to_string(second) + ": checksum "),
            std::string::npos);
}

TEST(Shards, AMidEpochStopResumesExactlyOnOneProcessAndOnTwo) {
  ShardedFolder f(ImageFolderSpec{3, 8, 2});
  // mnist_cnn (no BatchNorm, no dropout): one process accumulating two micro-batches of 4 sums what two ranks of 4
  // sum, in the same order (tests/e2e/distributed_test.cpp), so a run may continue on either.
  const json o{{"run", {{"threads", 1}}},
               {"data", {{"workers", 1}, {"batch_size", 4}}},
               {"model", {{"dropout", 0}}},
               {"train", {{"accumulate_steps", 2}}}};
  const std::string config = "--config " + f.config("c", f.shards.string(), o).string();
  ASSERT_NO_FATAL_FAILURE(run_straight_and_stopped(f, config));
  EXPECT_EQ(LoadedCheckpoint(f.dir / "stopped" / "last.pt").meta().step, 2);  // of 3 in the first epoch
  fs::copy(f.dir / "stopped", f.dir / "two", fs::copy_options::recursive);
  // Another batch size continues after the same images when it divides them (16 here), else says why not.
  const auto uneven = trainer_cli("--resume " + (f.dir / "two" / "last.pt").string() + " --set data.batch_size=6");
  EXPECT_NE(uneven.exit_code, 0) << uneven.output;
  EXPECT_NE(uneven.output.find("last.pt stopped after 16 images of epoch 1 (4 batches of 4); data.batch_size 6 does "
                               "not divide them"),
            std::string::npos)
      << uneven.output;
  const auto one = trainer_cli("--resume " + (f.dir / "stopped" / "last.pt").string());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  expect_same_weights(f.dir / "straight" / "last.pt", f.dir / "stopped" / "last.pt", {28, 28, 3});
  const auto two = trainer_cli("--resume " + (f.dir / "two" / "last.pt").string() +
                               " --nproc-per-node 2 --set data.batch_size=8 --set train.accumulate_steps=1");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("data-parallel: rank 0 of 2"), std::string::npos) << two.output;
  expect_same_weights(f.dir / "straight" / "last.pt", f.dir / "two" / "last.pt", {28, 28, 3});
}

// A folder run stopped mid-epoch continues on the folder's shards (`shards make` keeps the folder's order) where it
// stopped: the straight run's weights, bit for bit; shards of other photos are refused, naming both counts.
TEST(Shards, AFolderRunResumesOnItsShardsExactlyAndNotOnOtherPhotos) {
  ShardedFolder f;
  const std::string config = "--config " + f.config("folder", "", {{"data", {{"batch_size", 4}}}}).string();
  ASSERT_NO_FATAL_FAILURE(run_straight_and_stopped(f, config));
  EXPECT_EQ(LoadedCheckpoint(f.dir / "stopped" / "last.pt").meta().batch_in_epoch, 2);  // of 3 in the first epoch
  fs::copy(f.dir / "stopped", f.dir / "other", fs::copy_options::recursive);
  const auto resumed = trainer_cli("--resume " + (f.dir / "stopped" / "last.pt").string() +
                                   " --set data.kind=shards --set data.root=" + f.shards.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("and 2 batch(es), 2 step(s) done"), std::string::npos) << resumed.output;
  expect_same_weights(f.dir / "straight" / "last.pt", f.dir / "stopped" / "last.pt", {28, 28, 3});

  ShardedFolder more(ImageFolderSpec{3, 5, 2});
  const auto refused = trainer_cli("--resume " + (f.dir / "other" / "last.pt").string() +
                                   " --set data.kind=shards --set data.root=" + more.shards.string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("last.pt trained on 12 images in 3 classes (data.kind imagenet); the training data now "
                                "(shards " +
                                more.shards.string()),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find(") holds 15 in 3 classes: another data.kind resumes only on the same photos"),
            std::string::npos)
      << refused.output;
  // Other kinds still may not change: the classes of synthetic data are not the photos'.
  const auto synthetic = trainer_cli("--resume " + (f.dir / "other" / "last.pt").string() +
                                     " --set data.kind=synthetic --set data.synthetic.channels=3");
  EXPECT_NE(synthetic.exit_code, 0) << synthetic.output;
  EXPECT_NE(synthetic.output.find("data.kind: \"imagenet\" -> \"synthetic\" (the model, optim.name and data.kind "
                                  "cannot change on resume, except an image folder for its shards and back"),
            std::string::npos)
      << synthetic.output;
}

// pipe: shards (webdataset's "pipe:CMD"): refused without --allow-pipe, whatever the config says; with it, each
// command's output is copied once into data.shards.cache with its index and trains as the shards on disk do, bit for
// bit; a later start reads the copies and runs nothing. A command that fails or writes a cut tar leaves no copy.
TEST(Shards, PipeShardsRunOnlyWithAllowPipeAreCopiedOnceAndTrainAsOnDisk) {
  ShardedFolder f;
  size_t train_shards = 0, val_shards = 0;
  for (const auto& e : fs::directory_iterator(f.shards))
    if (e.path().extension() == ".tar")
      (e.path().filename().string().rfind("train-", 0) == 0 ? train_shards : val_shards)++;
  const fs::path source = f.dir / "source", cache = f.dir / "cache";
  fs::copy(f.shards, source, fs::copy_options::recursive);
  auto pipe = [&](const std::string& split, size_t count) {  // pipe:cat .../train-{000000..000011}.tar
    char last[24];                                           // any size_t, so no compiler sees a truncation
    std::snprintf(last, sizeof last, "%06zu", count - 1);
    return "pipe:cat " + (source / (split + "-{000000.." + last + "}.tar")).string();
  };
  const json o{
      {"data",
       {{"shards",
         {{"train", pipe("train", train_shards)}, {"val", pipe("val", val_shards)}, {"cache", cache.string()}}}}}};
  const std::string config = "--config " + f.config("pipe", f.shards.string(), o).string();
  const auto refused = trainer_cli(config + " -o " + (f.dir / "refused").string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("error: data: pipe:cat " + (source / "train-000000.tar").string() +
                                ": a shard read by running a command; give --allow-pipe to run it"),
            std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(cache));
  const auto set = trainer_cli(config + " --set data.shards.allow_pipe=true");
  EXPECT_EQ(set.exit_code, 2) << set.output;
  EXPECT_NE(set.output.find("data.shards.allow_pipe: unknown key"), std::string::npos) << set.output;

  const auto disk =
      trainer_cli("--config " + f.config("disk", f.shards.string()).string() + " -o " + (f.dir / "disk").string());
  ASSERT_EQ(disk.exit_code, 0) << disk.output;
  const auto piped = trainer_cli(config + " --allow-pipe -o " + (f.dir / "piped").string());
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_NE(piped.output.find(" shards, " + std::to_string(train_shards) + " from pipe: commands, copied in " +
                              cache.string() + " (" + std::to_string(train_shards) +
                              " now, 0 by an earlier start), 12 images"),
            std::string::npos)
      << piped.output;
  expect_same_weights(f.dir / "disk" / "last.pt", f.dir / "piped" / "last.pt", {28, 28, 3});
  size_t copies = 0, indexes = 0, locks = 0;
  for (const auto& e : fs::directory_iterator(cache)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".idx" || e.path().extension() == ".lock") {
      ++(e.path().extension() == ".idx" ? indexes : locks);
      continue;
    }
    ASSERT_EQ(e.path().extension(), ".tar") << name;  // no temporary file left
    ++copies;
    const std::string shard = name.substr(name.find('-') + 1);  // "<digest>-train-000003.tar"
    EXPECT_EQ(bytes_of(e.path()), bytes_of(f.shards / shard)) << name;
  }
  EXPECT_EQ(copies, train_shards + val_shards);
  EXPECT_EQ(indexes, copies);
  EXPECT_EQ(locks, copies);  // each shard's turn (the ranks of a machine run its command once)

  // The commands' files gone, a later start reads the copies: the same weights.
  fs::remove_all(source);
  const auto again = trainer_cli(config + " --allow-pipe -o " + (f.dir / "again").string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("(0 now, " + std::to_string(train_shards) + " by an earlier start)"), std::string::npos)
      << again.output;
  expect_same_weights(f.dir / "disk" / "last.pt", f.dir / "again" / "last.pt", {28, 28, 3});

  // A command that fails, and one whose tar is cut short: one-line errors naming the command; nothing is kept.
  DataConfig data;
  data.kind = DataKind::shards;
  data.root = ".";
  data.shards.allow_pipe = true;
  data.shards.cache = (f.dir / "cache2").string();
  data.shards.train = "pipe:cat " + (f.dir / "missing.tar").string();
  EXPECT_EQ(testing::error_of<DataError>([&] { open_shards(data, true, 3, 3); }),
            "data: " + data.shards.train +
                ": the command exited with code 1 after 0 bytes of output (a pipe: shard "
                "is the output of a command that succeeds)");
  data.shards.train = "pipe:head -c 700 " + (f.shards / "train-000000.tar").string();
  EXPECT_NE(testing::error_of<DataError>([&] {
              open_shards(data, true, 3, 3);
            }).find("data: " + data.shards.train + ": tar header at offset 0: the member's "),
            std::string::npos);
  for (const auto& e : fs::directory_iterator(f.dir / "cache2"))  // the shards' locks, no copy or temporary
    EXPECT_EQ(e.path().extension(), ".lock") << e.path();
}

// data.shards.cache_mb against the loopback server: the first shards in list order that fit under the limit are
// copied by the copier's thread, byte for byte with their indexes; the source then reads them from the disk (no more
// ranges for them), a later opening finds them without asking the server, and runs with the cache give the disk
// run's weights whether their copies were made before or during the run. A shard whose bytes disagree with its index
// is not copied and is still read by ranges.
TEST(Shards, RemoteShardsCopiedIntoTheCacheUpToItsLimitAreReadFromDiskWithTheSameBytes) {
  ShardedFolder f;
  WeightsServer server(f.dir.path());
  fs::remove_all(server.root());
  fs::copy(f.shards, server.root(), fs::copy_options::recursive);
  const fs::path cache = f.dir / "cache";
  fs::create_directories(cache);
  // Another run's file, sized so that train-000000 and -000001 (each with its index) fit under 1 MB and no more.
  const auto size_of = [&](const std::string& name) { return fs::file_size(f.shards / name); };
  const uintmax_t other = (uintmax_t{1} << 20) - size_of("train-000000.tar") - size_of("train-000000.idx") -
                          size_of("train-000001.tar") - size_of("train-000001.idx");
  write_text(cache / "other-run.bin", std::string(other, 'x'));
  DataConfig local;
  local.kind = DataKind::shards;
  local.root = f.shards.string();
  DataConfig remote = local;
  remote.root = server.address("");
  remote.shards.cache = cache.string();
  remote.shards.cache_mb = 1;
  remote.shards.read_ahead = 0;
  const auto disk = open_shards(local, /*train=*/true, 0, 3);
  size_t train_shards = 0;
  for (const auto& e : fs::directory_iterator(f.shards))
    train_shards += e.path().extension() == ".tar" && e.path().filename().string().rfind("train-", 0) == 0;
  ASSERT_GE(train_shards, 3u);
  {
    const auto http = open_shards(remote, /*train=*/true, 0, 3);
    EXPECT_NE(http->describe().find(" 0 read from copies in " + cache.string() + " and " +
                                    std::to_string(train_shards) + " to copy there as the run goes"),
              std::string::npos)
        << http->describe();
    ASSERT_TRUE(eventually([&] { return http->copy_counts().finished; }));
    const ShardCopier::Counts c = http->copy_counts();
    EXPECT_EQ(c.copied, 2u);
    EXPECT_EQ(c.skipped, train_shards - 2);
    EXPECT_EQ(c.failed, 0u) << c.first_failure;
    EXPECT_EQ(http->take_news(), "2 more shard(s) copied into the cache " + cache.string() + " (2 of the " +
                                     std::to_string(train_shards) + " to copy); " + std::to_string(train_shards - 2) +
                                     " shard(s) left out: the cache folder would pass data.shards.cache_mb (1 MB)");
    EXPECT_EQ(http->take_news(), "");
    const size_t before = server.requests().size();
    std::vector<uint8_t> a, b;
    for (size_t i = 0; i < http->size(); ++i) {
      ASSERT_TRUE(disk->read_encoded(i, a) && http->read_encoded(i, b));
      EXPECT_EQ(a, b) << i;
    }
    const std::string reads = server.requests().substr(before);
    EXPECT_EQ(reads.find("train-000000.tar"), std::string::npos) << reads;
    EXPECT_EQ(reads.find("train-000001.tar"), std::string::npos) << reads;
    EXPECT_NE(reads.find("train-000002.tar range=bytes="), std::string::npos) << reads;
  }
  std::set<std::string> kept;
  for (const auto& e : fs::directory_iterator(cache)) {
    const std::string name = e.path().filename().string();
    if (name == "other-run.bin" || name == kCopyLockName) continue;
    kept.insert(name.substr(name.find('-') + 1));  // "<digest>-train-000001.tar"
    EXPECT_EQ(bytes_of(e.path()), bytes_of(f.shards / name.substr(name.find('-') + 1))) << name;
  }
  EXPECT_EQ(kept,
            (std::set<std::string>{"train-000000.tar", "train-000000.idx", "train-000001.tar", "train-000001.idx"}));
  EXPECT_LE(folder_bytes(cache), uintmax_t{1} << 20);

  // A later opening reads the copies' own indexes: the server is not asked for those shards at all.
  const size_t before = server.requests().size();
  const auto again = open_shards(remote, /*train=*/true, 0, 3);
  EXPECT_NE(again->describe().find(" 2 read from copies in "), std::string::npos) << again->describe();
  EXPECT_TRUE(eventually([&] { return again->copy_counts().finished; }));
  const std::string opening = server.requests().substr(before);
  EXPECT_EQ(opening.find("train-000000"), std::string::npos) << opening;
  EXPECT_NE(opening.find("train-000002.idx"), std::string::npos) << opening;

  // Training: with the two copies there, and with a cache filled during the run, the disk run's weights.
  const auto disk_run =
      trainer_cli("--config " + f.config("disk", f.shards.string()).string() + " -o " + (f.dir / "disk").string());
  ASSERT_EQ(disk_run.exit_code, 0) << disk_run.output;
  for (const fs::path& folder : {cache, f.dir / "empty-cache"}) {
    const json o{{"data", {{"shards", {{"cache", folder.string()}, {"cache_mb", 1}}}}}};
    const fs::path out = f.dir / ("run-" + folder.filename().string());
    const auto run =
        trainer_cli("--config " + f.config("cached", server.address(""), o).string() + " -o " + out.string());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    expect_same_weights(f.dir / "disk" / "last.pt", out / "last.pt", {28, 28, 3});
  }

  // An index that lists a member one byte shorter than its tar holds: that shard is not copied (nothing left of it in
  // the cache) and its samples are still read by ranges.
  std::string index = bytes_of(server.root() / "train-000000.idx");  // "v1.2 N\ncls 512 1 KEY.cls jpg 1536 ..."
  size_t at = index.find('\n') + 1;
  while (index.compare(at, 4, "cls ") == 0)
    for (int word = 0; word < 4; ++word) at = index.find(' ', at) + 1;  // past a label member's four words
  const size_t size_at = index.find(' ', index.find(' ', at) + 1) + 1, size_end = index.find(' ', size_at);
  const int64_t size = std::stoll(index.substr(size_at, size_end - size_at));
  index.replace(size_at, size_end - size_at, std::to_string(size - 1));
  write_text(server.root() / "train-000000.idx", index);
  DataConfig other_cache = remote;
  other_cache.shards.cache = (f.dir / "cache3").string();
  other_cache.shards.cache_mb = 100;
  const auto bad = open_shards(other_cache, /*train=*/true, 0, 3);
  ASSERT_TRUE(eventually([&] { return bad->copy_counts().finished; }));
  const ShardCopier::Counts c = bad->copy_counts();
  EXPECT_EQ(c.failed, 1u);
  EXPECT_EQ(c.copied, train_shards - 1);
  EXPECT_EQ(c.first_failure, server.address("train-000000.tar") + ": its tar lists other members than its index does");
  for (const auto& e : fs::directory_iterator(f.dir / "cache3"))
    EXPECT_EQ(e.path().filename().string().find("train-000000"), std::string::npos) << e.path();
  std::vector<uint8_t> bytes;
  const size_t before_read = server.requests().size();
  ASSERT_TRUE(bad->read_encoded(0, bytes));
  EXPECT_NE(server.requests().substr(before_read).find("train-000000.tar range=bytes="), std::string::npos);

  // A source closed while its first shard is being copied, over a slow link or while the server leaves the copy's
  // request unanswered: the transfer ends at the stop (libcurl's progress check) with no retry after it, and
  // nothing is left in the cache.
  const auto close_while_copying = [&](const WeightsServer& remote_server, const fs::path& folder) {
    fs::copy(f.shards, remote_server.root(), fs::copy_options::recursive);
    DataConfig d = other_cache;
    d.root = remote_server.address("");
    d.shards.cache = folder.string();
    {
      const auto closing = open_shards(d, /*train=*/true, 0, 3);
      ASSERT_TRUE(
          eventually([&] { return remote_server.requests().find("train-000000.tar range=-") != std::string::npos; }));
    }
    const std::string asked = remote_server.requests();
    EXPECT_EQ(asked.find("train-000000.tar range=-"), asked.rfind("train-000000.tar range=-")) << asked;
    EXPECT_EQ(asked.find("train-000001.tar"), std::string::npos) << asked;
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(folder)) left.push_back(e.path().filename().string());
    EXPECT_EQ(left, std::vector<std::string>{kCopyLockName});
  };
  close_while_copying(WeightsServer(f.dir / "slow", "--slow-whole 100"), f.dir / "cache4");
  close_while_copying(WeightsServer(f.dir / "stalled", "--hang-whole-tar"), f.dir / "cache5");
}

// The read-ahead's transport on its own: ranges in flight together each come back with their own bytes and tag; a
// missing file and a server that ignores ranges are errors naming the address and the range; wake() ends a wait.
TEST(Shards, ConcurrentRangesBringEachRangesBytesOrSayWhyNot) {
  TempDir dir;
  WeightsServer server(dir.path());
  std::string file(300000, '\0');
  for (size_t i = 0; i < file.size(); ++i) file[i] = static_cast<char>((i * 7 + i / 256) % 256);
  write_text(server.root() / "blob.bin", file);
  const auto wait_for = [](ConcurrentRanges& ranges, size_t count) {
    std::vector<ConcurrentRanges::Ended> ended;
    for (int i = 0; i < 3000 && ended.size() < count; ++i) ranges.wait(ended, 100);  // a hang guard
    return ended;
  };
  ConcurrentRanges ranges(3);
  const std::map<uint64_t, std::pair<uint64_t, uint64_t>> asked{{10, {0, 1}}, {11, {1000, 60000}}, {12, {299999, 1}}};
  for (const auto& [tag, range] : asked) ranges.start(tag, server.address("blob.bin"), range.first, range.second, {});
  const auto ended = wait_for(ranges, 3);
  ASSERT_EQ(ended.size(), 3u);
  std::set<uint64_t> tags;
  for (const auto& e : ended) {
    EXPECT_EQ(e.error, "");
    const auto [offset, size] = asked.at(e.tag);
    EXPECT_EQ(std::string(e.bytes.begin(), e.bytes.end()), file.substr(offset, size)) << e.tag;
    tags.insert(e.tag);
  }
  EXPECT_EQ(tags.size(), 3u);

  ranges.start(20, server.address("missing.bin"), 0, 10, {});
  const auto missing = wait_for(ranges, 1);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].tag, 20u);
  EXPECT_EQ(missing[0].error, server.address("missing.bin") + ": bytes 0-9: the server answered HTTP 404");

  std::vector<ConcurrentRanges::Ended> none;
  const auto before = std::chrono::steady_clock::now();
  ranges.wake();
  ranges.wait(none, 120000);
  EXPECT_TRUE(none.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(60));  // woken, not timed out

  WeightsServer ignoring(dir / "ignoring", "--ignore-range");
  write_text(ignoring.root() / "blob.bin", file);
  ConcurrentRanges whole(1);
  whole.start(30, ignoring.address("blob.bin"), 0, 10, {});
  const auto refused = wait_for(whole, 1);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].error,
            ignoring.address("blob.bin") +
                ": bytes 0-9: the server ignores Range requests (HTTP 200 for a range): it would send "
                "the whole shard for every sample");
}

// Two sources sharing a cache (two ranks of a machine) while each shard's copy takes a while over a slow link: the
// copiers take turns through the folder's lock file, so the server is asked for each shard's whole file once, and
// both sources end up reading every shard from the one copy of it.
TEST(Shards, CopiersSharingACacheTakeTurnsAndFetchEachShardOnce) {
  ShardedFolder f;
  WeightsServer server(f.dir / "slow", "--slow-whole 20");
  fs::copy(f.shards, server.root(), fs::copy_options::recursive);
  DataConfig remote;
  remote.kind = DataKind::shards;
  remote.root = server.address("");
  remote.shards.cache = (f.dir / "cache").string();
  remote.shards.cache_mb = 100;
  remote.shards.read_ahead = 0;
  DataConfig local = remote;
  local.root = f.shards.string();
  const auto disk = open_shards(local, /*train=*/true, 0, 3);
  std::vector<std::string> train_shards;
  for (const auto& e : fs::directory_iterator(f.shards))
    if (e.path().extension() == ".tar" && e.path().filename().string().rfind("train-", 0) == 0)
      train_shards.push_back(e.path().filename().string());
  ASSERT_GE(train_shards.size(), 3u);
  {
    const auto a = open_shards(remote, /*train=*/true, 0, 3);
    const auto b = open_shards(remote, /*train=*/true, 0, 3);
    ASSERT_TRUE(eventually([&] { return a->copy_counts().finished && b->copy_counts().finished; }));
    for (const auto* source : {&a, &b}) {
      const ShardCopier::Counts c = (*source)->copy_counts();
      EXPECT_EQ(c.copied, train_shards.size());
      EXPECT_EQ(c.failed, 0u) << c.first_failure;
      EXPECT_EQ(c.lock_problem, "");
    }
    const std::string asked = server.requests();
    for (const std::string& shard : train_shards) {
      const std::string whole = shard + " range=-";
      EXPECT_NE(asked.find(whole), std::string::npos) << asked;
      EXPECT_EQ(asked.find(whole), asked.rfind(whole)) << asked;
    }
    const size_t before = server.requests().size();
    std::vector<uint8_t> expected, got;
    for (size_t i = 0; i < disk->size(); ++i) {
      ASSERT_TRUE(disk->read_encoded(i, expected));
      for (const auto* source : {&a, &b}) {
        ASSERT_TRUE((*source)->read_encoded(i, got));
        EXPECT_EQ(got, expected) << i;
      }
    }
    EXPECT_EQ(server.requests().substr(before), "");
  }
  size_t tars = 0;
  for (const auto& e : fs::directory_iterator(f.dir / "cache")) tars += e.path().extension() == ".tar";
  EXPECT_EQ(tars, train_shards.size());
}

TEST(Shards, AShardThatAnswers404IsABadSampleOrPastTheLimitAOneLineError) {
  ShardedFolder f;
  WeightsServer server(f.dir.path());
  fs::remove_all(server.root());
  fs::copy(f.shards, server.root(), fs::copy_options::recursive);
  fs::remove(server.root() / "train-000001.tar");  // its index is still there: the run opens, its reads fail
  const std::string config = "--config " + f.config("http", server.address(""), {{"train", {{"epochs", 1}}}}).string();
  const auto stop = trainer_cli(config + " -o " + (f.dir / "stop").string());
  EXPECT_EQ(stop.exit_code, 2) << stop.output;
  EXPECT_NE(stop.output.find("data: "), std::string::npos) << stop.output;
  EXPECT_NE(stop.output.find("train images could not be read, more than data.max_bad_fraction"), std::string::npos)
      << stop.output;
  const auto ok = trainer_cli(config + " -o " + (f.dir / "ok").string() + " --set data.max_bad_fraction=0.5");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("train sample 1 skipped: " + server.address("train-000001.tar") + ": bytes "),
            std::string::npos)
      << ok.output;
  EXPECT_NE(ok.output.find("epoch 1: 1 unreadable training image(s) replaced by others"), std::string::npos)
      << ok.output;
  EXPECT_NE(ok.output.find(": the server answered HTTP 404 (shard " + server.address("train-000001.tar") + ", offset "),
            std::string::npos)
      << ok.output;
  // A shard whose index and tar both answer 404: a one-line error before training, naming the shard.
  fs::remove(server.root() / "train-000001.idx");
  const auto no_index = trainer_cli(config + " -o " + (f.dir / "none").string());
  EXPECT_EQ(no_index.exit_code, 2) << no_index.output;
  EXPECT_NE(no_index.output.find("error: data: " + server.address("train-000001.tar") +
                                 ": reading it through, at byte 0: the server answered HTTP 404 (a shard without an "
                                 "index is read through once to list its samples)\n"),
            std::string::npos)
      << no_index.output;
}

}  // namespace
}  // namespace trainer
