#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "trainer/config/load.hpp"
#include "trainer/config/schema.hpp"
#include "trainer/engine/resolve_config.hpp"
#include "trainer/util/error.hpp"
#include "trainer/util/text.hpp"

namespace trainer {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::write_text;

json minimal() { return json{{"data", {{"root", "/data"}}}}; }

std::string config_error(const json& j) {
  try {
    resolve_config(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Config, DefaultsComeFromTheStructs) {
  const Config c = resolve_config(minimal());
  EXPECT_EQ(c.data.batch_size, 64);
  EXPECT_EQ(c.model.arch, "mnist_cnn");
  EXPECT_EQ(c.schedule.kind, ScheduleKind::cosine);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.01);
}

TEST(Config, ReadsTypedValues) {
  json j = minimal();
  j["optim"] = {{"lr", 0.2}, {"nesterov", true}};
  j["data"]["batch_size"] = 128;
  j["data"]["mean"] = {0.5};
  j["schedule"] = {{"kind", "step"}};
  const Config c = resolve_config(j);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.2);
  EXPECT_TRUE(c.optim.nesterov);
  EXPECT_EQ(c.data.batch_size, 128);
  EXPECT_EQ(c.schedule.kind, ScheduleKind::step);
}

// model.weights naming a published entry gives the config the entry's eval transform where it is silent; what the
// config (or --set) gives is kept, and a file or an address changes nothing.
TEST(Config, PublishedWeightsBringTheirEvalTransform) {
  auto with = [](const std::string& arch, const std::string& weights, const json& augment = json::object()) {
    json j{{"data", {{"kind", "imagenet"}, {"root", "/data"}, {"augment", augment}}},
           {"model", {{"arch", arch}, {"in_channels", 3}, {"weights", weights}}}};
    return resolve_config(j);
  };
  Config c = with("efficientnet_b0", "IMAGENET1K_V1");
  EXPECT_EQ(c.data.augment.interpolation, Interpolation::bicubic);
  EXPECT_EQ(c.data.augment.eval_resize, 256);
  EXPECT_EQ(c.data.augment.eval_crop, 224);
  c = with("resnet50", "DEFAULT");  // IMAGENET1K_V2: resize 232
  EXPECT_EQ(c.data.augment.interpolation, Interpolation::bilinear);
  EXPECT_EQ(c.data.augment.eval_resize, 232);
  c = with("efficientnet_v2_l", "IMAGENET1K_V1", {{"image_size", 480}});  // 480 -> 480, mean and std 0.5
  EXPECT_EQ(c.data.augment.eval_resize, 480);
  EXPECT_EQ(c.data.mean, (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_EQ(c.data.std, (std::vector<double>{0.5, 0.5, 0.5}));
  // Kept: what the config sets, and an eval size other than the entry's crop (its resize is for its crop).
  c = with("efficientnet_b0", "IMAGENET1K_V1", {{"interpolation", "bilinear"}, {"eval_resize", 240}});
  EXPECT_EQ(c.data.augment.interpolation, Interpolation::bilinear);
  EXPECT_EQ(c.data.augment.eval_resize, 240);
  c = with("efficientnet_b0", "IMAGENET1K_V1", {{"image_size", 128}});
  EXPECT_EQ(c.data.augment.interpolation, Interpolation::bicubic);
  EXPECT_EQ(c.data.augment.eval_resize, 146);  // 128 / 0.875, as without weights
  c = with("efficientnet_b0", "/weights/mine.pth");
  EXPECT_EQ(c.data.augment.interpolation, Interpolation::bilinear);
  EXPECT_EQ(c.data.augment.eval_resize, 256);  // 224 / 0.875
  // From a file with --set, as `trainer --config` reads it.
  TempDir dir;
  write_text(dir / "c.json", R"({"data": {"kind": "imagenet", "root": "/data"}, "model": {"arch": "swin_v2_t",
             "in_channels": 3}})");
  c = resolve_config(dir / "c.json", {"model.weights=IMAGENET1K_V1", "data.augment.image_size=256"});
  EXPECT_EQ(c.data.augment.interpolation, Interpolation::bicubic);
  EXPECT_EQ(c.data.augment.eval_resize, 260);
  EXPECT_EQ(c.run.name, "c");
}

TEST(Config, UnknownKeySuggestsTheClosest) {
  json j = minimal();
  j["optim"] = {{"lrr", 0.1}};
  EXPECT_EQ(config_error(j).rfind("config: optim.lrr: unknown key; did you mean \"lr\"?", 0), 0u) << config_error(j);
  json top = minimal();
  top["trian"] = json::object();
  EXPECT_NE(config_error(top).find("did you mean \"train\""), std::string::npos);
}

TEST(Config, WrongTypeNamesPathAndExpectation) {
  json j = minimal();
  j["data"]["batch_size"] = "big";
  EXPECT_EQ(config_error(j), "config: data.batch_size: expected an integer, got \"big\"");
  j["data"]["batch_size"] = 2.5;
  EXPECT_EQ(config_error(j), "config: data.batch_size: expected an integer, got 2.5");
  json k = minimal();
  k["optim"] = {{"nesterov", 1}};
  EXPECT_EQ(config_error(k), "config: optim.nesterov: expected true or false, got 1");
}

TEST(Config, OutOfRangeValues) {
  json j = minimal();
  j["optim"] = {{"lr", -1}};
  EXPECT_EQ(config_error(j), "config: optim.lr: expected a number > 0, got -1");
  j["optim"] = {{"lr", 0}};
  EXPECT_EQ(config_error(j), "config: optim.lr: expected a number > 0, got 0");
  json b = minimal();
  b["data"]["batch_size"] = 0;
  EXPECT_EQ(config_error(b), "config: data.batch_size: expected a number in [1, 1048576], got 0");
  json w = minimal();
  w["data"]["workers"] = -1;
  EXPECT_EQ(config_error(w), "config: data.workers: expected a number in [0, 1024], got -1");
  // Counts that would otherwise run until killed have upper bounds.
  json n = minimal();
  n["data"]["augment"] = {{"auto_augment", {{"name", "randaugment"}, {"num_ops", 1000000}}}};
  EXPECT_EQ(config_error(n), "config: data.augment.auto_augment.num_ops: expected a number in [0, 64], got 1000000");
  json k = minimal();
  k["model"] = {{"num_classes", 1}};
  EXPECT_EQ(config_error(k), "config: model.num_classes: expected 0 (the training set's count) or at least 2, got 1");
  EXPECT_EQ(resolve_config(minimal()).model.num_classes, 0);  // from the training data when the run starts
}

TEST(Config, UnknownEnumListsValidValues) {
  json j = minimal();
  j["schedule"] = {{"kind", "cosin"}};
  EXPECT_EQ(config_error(j),
            "config: schedule.kind: unknown value \"cosin\"; did you mean \"cosine\"? (valid: constant, cosine, step, "
            "multistep, exponential, polynomial)");
}

TEST(Config, ModelSectionReadsStemAndWeightOptions) {
  json j = minimal();
  j["model"] = {{"arch", "resnet50"},
                {"stem", "small"},
                {"zero_init_residual", true},
                {"init_from", "w.safetensors"},
                {"init_exclude", {"fc.*", "layer4.*"}}};
  const Config c = resolve_config(j);
  EXPECT_EQ(c.model.stem, StemKind::small);
  EXPECT_TRUE(c.model.zero_init_residual);
  EXPECT_EQ(c.model.init_from, "w.safetensors");
  EXPECT_EQ(c.model.init_exclude, (std::vector<std::string>{"fc.*", "layer4.*"}));
  EXPECT_EQ(config_to_json(c)["model"]["stem"], "small");
  j["model"]["stem"] = "tiny";
  EXPECT_EQ(config_error(j), "config: model.stem: unknown value \"tiny\" (valid: imagenet, small)");
  j["model"]["stem"] = "small";
  j["model"]["init_exclude"] = "fc.*";
  EXPECT_NE(config_error(j).find("model.init_exclude: expected"), std::string::npos) << config_error(j);
}

// model.weights_sha256: a whole digest in either case, and only beside a file to check.
TEST(Config, WeightsSha256IsAWholeDigestBesideAFile) {
  const std::string digest(64, 'A');
  json j = minimal();
  j["model"] = {{"init_from", "w.pth"}, {"weights_sha256", digest}};
  EXPECT_EQ(resolve_config(j).model.weights_sha256, digest);
  j["model"]["weights_sha256"] = digest.substr(1) + "g";
  EXPECT_EQ(config_error(j),
            "config: model.weights_sha256: expected 64 hex digits (a SHA-256, as sha256sum prints it), "
            "got \"" +
                digest.substr(1) + "g\"");
  j["model"]["weights_sha256"] = digest.substr(0, 8);  // a prefix is what the file name already carries
  EXPECT_NE(config_error(j).find("expected 64 hex digits"), std::string::npos);
  j["model"] = {{"weights_sha256", digest}};
  EXPECT_EQ(config_error(j),
            "config: model.weights_sha256: set, but neither model.weights nor model.init_from names a file");
}

TEST(Config, CrossFieldRules) {
  json j = json::object();
  EXPECT_NE(config_error(j).find("data.root"), std::string::npos);
  json m = minimal();
  m["data"]["mean"] = {0.1, 0.2};
  EXPECT_NE(config_error(m).find("data.mean: expected 1 or model.in_channels (1) values, got 2"), std::string::npos);
}

TEST(Config, ExtendsMergesParentUnderChild) {
  TempDir dir;
  write_text(dir / "base.json", R"({"data": {"root": "/base", "batch_size": 32}, "optim": {"lr": 0.5}})");
  write_text(dir / "child.json", R"({"extends": "base.json", "data": {"batch_size": 16}})");
  const Config c = resolve_config(dir / "child.json", {});
  EXPECT_EQ(c.data.root, "/base");
  EXPECT_EQ(c.data.batch_size, 16);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.5);
  EXPECT_EQ(c.run.name, "child");
}

TEST(Config, ExtendsCycleIsAnError) {
  TempDir dir;
  write_text(dir / "a.json", R"({"extends": "b.json"})");
  write_text(dir / "b.json", R"({"extends": "a.json"})");
  EXPECT_THROW(resolve_config(dir / "a.json", {}), ConfigError);
}

TEST(Config, InvalidJsonNamesTheFile) {
  TempDir dir;
  write_text(dir / "bad.json", "{\"data\": ");
  try {
    resolve_config(dir / "bad.json", {});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: invalid JSON"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_config(dir / "missing.json", {}), ConfigError);
}

// Switch keys take true, false or "auto" and are written back the same way; the schema lists all three.
TEST(Config, SwitchesReadBooleansAndAuto) {
  json j = minimal();
  EXPECT_EQ(resolve_config(j).model.channels_last, Switch::automatic);
  EXPECT_EQ(config_to_json(resolve_config(j))["model"]["channels_last"], "auto");
  j["model"] = {{"channels_last", true}};
  j["train"] = {{"amp", {{"eval", false}}}};
  const Config c = resolve_config(j);
  EXPECT_EQ(c.model.channels_last, Switch::on);
  EXPECT_EQ(c.train.amp.eval, Switch::off);
  const json out = config_to_json(c);
  EXPECT_EQ(out["model"]["channels_last"], true);
  EXPECT_EQ(out["train"]["amp"]["eval"], false);
  EXPECT_EQ(resolve_config(out).model.channels_last, Switch::on);
  j["model"]["channels_last"] = "auto";
  EXPECT_EQ(resolve_config(j).model.channels_last, Switch::automatic);
  j["model"]["channels_last"] = "yes";
  EXPECT_EQ(config_error(j), "config: model.channels_last: unknown value \"yes\" (valid: auto, true, false)");
  j["model"]["channels_last"] = 1;
  EXPECT_NE(config_error(j).find("model.channels_last: expected one of auto, true, false"), std::string::npos)
      << config_error(j);
  const json schema = config_schema()["properties"]["model"]["properties"]["channels_last"];
  EXPECT_EQ(schema["enum"], json::parse(R"(["auto", true, false])"));
  EXPECT_EQ(schema["default"], "auto");
}

TEST(Config, RunBackendSwitchesDefaultForGpuTraining) {
  json j = minimal();
  const Config c = resolve_config(j);
  EXPECT_TRUE(c.run.cudnn_benchmark);
  EXPECT_TRUE(c.run.tf32);
  EXPECT_FALSE(c.run.deterministic);
  j["run"] = {{"deterministic", true}, {"tf32", false}, {"cudnn_benchmark", false}};
  const Config d = resolve_config(j);
  EXPECT_TRUE(d.run.deterministic);
  EXPECT_FALSE(d.run.tf32);
  EXPECT_FALSE(d.run.cudnn_benchmark);
}

TEST(Config, SetOverridesParseJsonElseString) {
  TempDir dir;
  write_text(dir / "c.json", R"({"data": {"root": "/d"}})");
  const Config c = resolve_config(dir / "c.json", {"optim.lr=0.02", "data.batch_size=128", "schedule.kind=constant",
                                                   "run.name=my run", "optim.nesterov=true"});
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.02);
  EXPECT_EQ(c.data.batch_size, 128);
  EXPECT_EQ(c.schedule.kind, ScheduleKind::constant);
  EXPECT_EQ(c.run.name, "my run");
  EXPECT_TRUE(c.optim.nesterov);
  EXPECT_THROW(resolve_config(dir / "c.json", {"optim.lr"}), UsageError);
  EXPECT_THROW(resolve_config(dir / "c.json", {"optim..lr=1"}), UsageError);
  EXPECT_THROW(resolve_config(dir / "c.json", {"optim.lrate=1"}), ConfigError);
  // A number JSON cannot hold: in the file, invalid JSON; in --set, text, which the field then refuses.
  write_text(dir / "huge.json", R"({"optim": {"lr": 1e999}})");
  EXPECT_THROW(resolve_config(dir / "huge.json", {}), ConfigError);
  write_text(dir / "zero.json", R"({"extends": "/dev/zero"})");
  try {
    resolve_config(dir / "zero.json", {});
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "config: /dev/zero: cannot open the config file (not a regular file)");
  }
  EXPECT_THROW(resolve_config(dir / "c.json", {"optim.lr=1e999"}), ConfigError);
  // A shell can pass bytes that are not UTF-8; a config is JSON, whose strings must be.
  try {
    resolve_config(dir / "c.json", {"run.name=caf\xe9"});
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "usage: --set run.name=caf\xe9: not UTF-8 text (a config holds JSON, which is UTF-8)");
  }
  EXPECT_EQ(resolve_config(dir / "c.json", {"run.name=caf\xc3\xa9"}).run.name, "caf\xc3\xa9");
}

TEST(Config, Utf8IsCheckedByTheStandardsRules) {
  EXPECT_TRUE(is_utf8("plain ascii"));
  EXPECT_TRUE(is_utf8("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // 2, 3 and 4 bytes
  EXPECT_FALSE(is_utf8("\xe9"));                                   // Latin-1
  EXPECT_FALSE(is_utf8("\xc0\xaf"));                               // overlong '/'
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));                           // a UTF-16 surrogate
  EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80"));                       // past U+10FFFF
  EXPECT_FALSE(is_utf8("\xe2\x82"));                               // cut short
}

TEST(Config, ResolvedJsonRoundTrips) {
  json j = minimal();
  j["optim"] = {{"lr", 0.123456789}};
  j["schedule"] = {{"kind", "step"}};
  const Config a = resolve_config(j);
  const json resolved = config_to_json(a);
  const Config b = resolve_config(resolved);
  EXPECT_EQ(config_to_json(b), resolved);
  EXPECT_EQ(resolved["schedule"]["kind"], "step");
  EXPECT_DOUBLE_EQ(b.optim.lr, 0.123456789);
}

TEST(Config, EngineKeysAreCheckedTogether) {
  auto rooted = [](json j) {
    j.merge_patch({{"data", {{"root", "data"}}}});
    return j;
  };
  json j = {{"train", {{"best_metric", "ema_top1"}}}};
  EXPECT_EQ(config_error(rooted(j)), "config: train.best_metric: \"ema_top1\" needs train.ema.enabled");
  j = {{"train", {{"early_stopping", {{"patience", 3}, {"metric", "ema_top1"}}}}}};
  EXPECT_EQ(config_error(rooted(j)), "config: train.early_stopping.metric: \"ema_top1\" needs train.ema.enabled");
  j = {{"train", {{"early_stopping", {{"patience", -1}}}}}};
  EXPECT_NE(config_error(rooted(j)).find("train.early_stopping.patience"), std::string::npos);
  j = {{"optim", {{"betas", {0.9, 1.0}}}}};
  EXPECT_EQ(config_error(rooted(j)), "config: optim.betas: expected [beta1, beta2] in [0, 1), got [0.9,1.0]");
  j = {{"schedule", {{"kind", "multistep"}}}};
  EXPECT_EQ(config_error(rooted(j)),
            "config: schedule.milestones: the multistep schedule needs at least one milestone");
  j = {{"schedule", {{"kind", "multistep"}, {"milestones", {3, 2}}}}};
  EXPECT_EQ(config_error(rooted(j)), "config: schedule.milestones: expected increasing epochs >= 0, got [3.0,2.0]");
  j = {{"schedule", {{"min_lr", 0.5}}}, {"optim", {{"lr_per_256", 0.1}}}, {"data", {{"batch_size", 256}}}};
  EXPECT_EQ(config_error(rooted(j)),
            "config: schedule.min_lr: expected a value <= the base learning rate (0.1), got 0.5");
  Config c;
  c.optim.lr_per_256 = 0.1;
  c.data.batch_size = 128;
  c.train.accumulate_steps = 4;
  EXPECT_DOUBLE_EQ(base_learning_rate(c), 0.2);
}

}  // namespace
}  // namespace trainer
