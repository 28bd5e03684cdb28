// What users look at: curves.png, eval reports (eval.json, confusion.png, --predictions), predict, doctor,
// config show / schema.
#include <gtest/gtest.h>

#include <torch/version.h>
#include <opencv2/imgcodecs.hpp>

#include <sstream>

#include "e2e/e2e_support.hpp"
#include "trainer/data/sources/mnist_idx.hpp"

namespace trainer {
namespace {

using namespace trainer::testing;
using nlohmann::json;

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, ',');) out.push_back(field);
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// One trained SmallRun shared by the report tests (training is the slow part).
class Reports : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Readable names (data.class_names) travel into the checkpoint and every report.
    json names = json::array();
    for (int i = 0; i < 10; ++i) names.push_back("class " + std::to_string(i));
    run_ = new SmallRun(json{{"train", {{"ema", {{"enabled", true}}}}}, {"data", {{"class_names", names}}}});
    out_ = run_->dir / "run";
    const auto r = trainer_cli("--config " + run_->config.string() + " -o " + out_.string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // The generated classes are learnt perfectly in 2 epochs; after 2 steps the model still confuses them.
    early_ = run_->dir / "early";
    const auto e = trainer_cli("--config " + run_->config.string() + " -o " + early_.string() + " --stop-after-step 2");
    ASSERT_EQ(e.exit_code, 0) << e.output;
  }
  static void TearDownTestSuite() { delete run_; }
  static SmallRun* run_;
  static fs::path out_, early_;
};
SmallRun* Reports::run_ = nullptr;
fs::path Reports::out_, Reports::early_;

TEST_F(Reports, TrainingDrawsCurvesAndPlotRedrawsThem) {
  const fs::path png = out_ / "curves.png";
  ASSERT_TRUE(fs::exists(png));
  const cv::Mat img = cv::imread(png.string());
  EXPECT_EQ(img.cols, 1600);
  EXPECT_EQ(img.rows, 1004);
  fs::remove(png);
  const auto r = trainer_cli("plot " + out_.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "wrote " + png.string() + "\n");
  EXPECT_FALSE(cv::imread(png.string()).empty());
  const auto missing = trainer_cli("plot " + (run_->dir / "nowhere").string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.output,
            "error: " + (run_->dir / "nowhere").string() + ": no metrics.jsonl (is this a run folder?)\n");
}

TEST_F(Reports, EvalWritesPerClassConfusionAndPredictions) {
  const fs::path csv = run_->dir / "predictions.csv";
  const auto r = trainer_cli("eval --checkpoint " + (early_ / "last.pt").string() + " --predictions " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("per-class accuracy, lowest first:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("most confused (true -> predicted):\n  class "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote " + (early_ / "eval.json").string() + " and " + (early_ / "confusion.png").string()),
            std::string::npos)
      << r.output;
  const json j = json::parse(read_text(early_ / "eval.json"));
  EXPECT_EQ(j["split"], "val");
  EXPECT_EQ(j["weights"], "raw");
  const int64_t images = j["images"], correct1 = j["correct1"];
  ASSERT_EQ(images, 256);
  // The matrix, the per-class figures and top-1 tell one story.
  const auto& m = j["confusion"];
  ASSERT_EQ(m.size(), 10u);
  int64_t total = 0, diagonal = 0;
  for (size_t t = 0; t < 10; ++t) {
    int64_t row = 0;
    for (size_t p = 0; p < 10; ++p) row += m[t][p].get<int64_t>();
    EXPECT_EQ(j["per_class"][t]["images"], row);
    EXPECT_EQ(j["per_class"][t]["correct"], m[t][t]);
    total += row;
    diagonal += m[t][t].get<int64_t>();
  }
  EXPECT_EQ(total, images);
  EXPECT_EQ(diagonal, correct1);
  EXPECT_LT(correct1, images);
  ASSERT_FALSE(j["most_confused"].empty());
  int64_t previous = std::numeric_limits<int64_t>::max();
  for (const auto& pair : j["most_confused"]) {
    EXPECT_NE(pair["true"], pair["predicted"]);
    EXPECT_EQ(pair["count"], m[pair["true"].get<size_t>()][pair["predicted"].get<size_t>()]);
    EXPECT_LE(pair["count"].get<int64_t>(), previous);
    previous = pair["count"];
  }
  EXPECT_FALSE(cv::imread((early_ / "confusion.png").string()).empty());

  // predictions.csv: one row per image in order, its true label, top-5 best first; top-1 hits = correct1.
  const MnistIdx test(MnistIdx::find_files(run_->dir / "data", "t10k"), 10);
  const auto rows = lines_of(read_text(csv));
  ASSERT_EQ(rows.size(), 257u);
  EXPECT_EQ(rows[0], "path,label,class1,prob1,class2,prob2,class3,prob3,class4,prob4,class5,prob5");
  int64_t hits = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto f = split_csv_line(rows[i]);
    ASSERT_EQ(f.size(), 12u) << rows[i];
    EXPECT_EQ(f[0], test.sample_name(i - 1));
    EXPECT_EQ(f[1], "class " + std::to_string(test.label(i - 1)));
    double sum = 0, last = 1;
    for (size_t k = 0; k < 5; ++k) {
      const double p = std::stod(f[3 + 2 * k]);
      EXPECT_LE(p, last + 1e-6);
      last = p;
      sum += p;
    }
    EXPECT_LE(sum, 1.0 + 1e-4);
    hits += f[2] == f[1];
  }
  EXPECT_EQ(hits, correct1);
}

TEST_F(Reports, EvalEmaAndTrainSplit) {
  const auto ema = trainer_cli("eval --checkpoint " + (out_ / "last.pt").string() + " --ema --split train");
  ASSERT_EQ(ema.exit_code, 0) << ema.output;
  EXPECT_NE(ema.output.find("(epoch 2, train split, EMA weights): 512 images"), std::string::npos) << ema.output;
  const json j = json::parse(read_text(out_ / "eval_train_ema.json"));
  EXPECT_EQ(j["weights"], "ema");
  EXPECT_EQ(j["split"], "train");
  EXPECT_TRUE(fs::exists(out_ / "confusion_train_ema.png"));
  // The EMA's figures match the training log's last eval (ema) row for the val split.
  const auto val = trainer_cli("eval --checkpoint " + (out_ / "last.pt").string() + " --ema --output-dir " +
                               (run_->dir / "reports").string());
  ASSERT_EQ(val.exit_code, 0) << val.output;
  double logged = -1;
  for (const auto& line : lines_of(read_text(out_ / "metrics.jsonl"))) {
    const json row = json::parse(line);
    if (row["kind"] == "eval_ema") logged = row["top1"];
  }
  EXPECT_DOUBLE_EQ(json::parse(read_text(run_->dir / "reports" / "eval_ema.json"))["top1"].get<double>(), logged);

  SmallRun plain(json{{"train", {{"epochs", 1}}}});
  ASSERT_EQ(trainer_cli("--config " + plain.config.string() + " -o " + (plain.dir / "r").string()).exit_code, 0);
  const auto none = trainer_cli("eval --checkpoint " + (plain.dir / "r" / "last.pt").string() + " --ema");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("holds no EMA weights"), std::string::npos) << none.output;
}

TEST_F(Reports, PredictMatchesEvalOnTheSameImages) {
  const MnistIdx test(MnistIdx::find_files(run_->dir / "data", "t10k"), 10);
  std::string files;
  for (size_t i = 0; i < 3; ++i) {
    const fs::path png = run_->dir / ("digit" + std::to_string(i) + ".png");
    ASSERT_TRUE(cv::imwrite(png.string(), test.read(i).image));
    files += " " + png.string();
  }
  const auto r = trainer_cli("predict --checkpoint " + (early_ / "last.pt").string() + " --json" + files);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  ASSERT_EQ(j["predictions"].size(), 3u);
  const fs::path csv = run_->dir / "p.csv";
  ASSERT_EQ(trainer_cli("eval --checkpoint " + (early_ / "last.pt").string() + " --predictions " + csv.string() +
                        " --output-dir " + (run_->dir / "p").string())
                .exit_code,
            0);
  const auto rows = lines_of(read_text(csv));
  for (size_t i = 0; i < 3; ++i) {
    const auto& top = j["predictions"][i]["top"];
    ASSERT_EQ(top.size(), 5u);
    const auto f = split_csv_line(rows[i + 1]);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(top[k]["name"], f[2 + 2 * k]) << "image " << i << " rank " << k;
      EXPECT_NEAR(top[k]["prob"].get<double>(), std::stod(f[3 + 2 * k]), 2e-6);
    }
  }
  const auto text = trainer_cli("predict --checkpoint " + (early_ / "last.pt").string() + files);
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_EQ(lines_of(text.output).size(), 3u * 6u) << text.output;

  const auto missing =
      trainer_cli("predict --checkpoint " + (early_ / "last.pt").string() + " " + (run_->dir / "none.png").string());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.output, "error: data: " + (run_->dir / "none.png").string() + ": no such image file\n");
  write_text(run_->dir / "broken.png", "not a png");
  const auto broken =
      trainer_cli("predict --checkpoint " + (early_ / "last.pt").string() + " " + (run_->dir / "broken.png").string());
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.output.find((run_->dir / "broken.png").string()), std::string::npos) << broken.output;
}

TEST(Doctor, ChecksRuntimeDataAndOutput) {
  const auto bare = trainer_cli("doctor");
  EXPECT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_NE(bare.output.find("ok       libtorch    LibTorch " TORCH_VERSION), std::string::npos) << bare.output;
  // The channels_last self-check: ok where the kernels are right, a warning naming the fallback where not.
  EXPECT_TRUE(bare.output.find("ok       layout      channels_last kernels match") != std::string::npos ||
              bare.output.find("warning  layout      channels_last convolutions on this LibTorch") != std::string::npos)
      << bare.output;
  EXPECT_NE(bare.output.find(" blas "), std::string::npos) << bare.output;
  EXPECT_NE(bare.output.find(" threads "), std::string::npos) << bare.output;

  SmallRun run;
  const auto good = trainer_cli("doctor --config " + run.config.string() + " -o " + (run.dir / "r").string());
  EXPECT_EQ(good.exit_code, 0) << good.output;
  for (const char* line :
       {"ok       config      ", "ok       data train  ", "ok       data eval   ", "ok       output      "})
    EXPECT_NE(good.output.find(line), std::string::npos) << line << "\n" << good.output;
  EXPECT_NE(good.output.find("64/64 sampled images read"), std::string::npos) << good.output;
  EXPECT_NE(good.output.find("lr 0.05"), std::string::npos) << good.output;
  EXPECT_FALSE(fs::exists(run.dir / "r"));  // doctor creates nothing

  const auto no_data =
      trainer_cli("doctor --config " + run.config.string() + " --set data.root=" + (run.dir / "nowhere").string() +
                  " -o " + (run.dir / "r").string());
  EXPECT_EQ(no_data.exit_code, 1) << no_data.output;
  EXPECT_NE(no_data.output.find("failed   data train  data: " + (run.dir / "nowhere").string()), std::string::npos)
      << no_data.output;

  write_text(run.dir / "a-file", "x");
  const auto unwritable =
      trainer_cli("doctor --config " + run.config.string() + " -o " + (run.dir / "a-file" / "r").string());
  EXPECT_EQ(unwritable.exit_code, 1) << unwritable.output;
  EXPECT_NE(unwritable.output.find("failed   output"), std::string::npos) << unwritable.output;
  EXPECT_NE(unwritable.output.find("doctor: 1 check(s) failed"), std::string::npos) << unwritable.output;

  const auto bad_config = trainer_cli("doctor --config " + run.config.string() + " --set optim.lr=-1");
  EXPECT_EQ(bad_config.exit_code, 1);
  EXPECT_NE(bad_config.output.find("failed   config      config: optim.lr: expected a number > 0, got -1"),
            std::string::npos)
      << bad_config.output;
}

TEST(ConfigCommand, ShowResolvesAndSchemaMatchesTheCommittedFile) {
  SmallRun run;
  const auto show = trainer_cli("config show --config " + run.config.string() + " --set optim.lr=0.5");
  ASSERT_EQ(show.exit_code, 0) << show.output;
  const json j = json::parse(show.output);
  EXPECT_EQ(j["optim"]["lr"], 0.5);
  EXPECT_EQ(j["run"]["name"], "config");
  EXPECT_EQ(j["data"]["mean"], json::array({0.1307}));  // derived defaults are filled in
  const auto bad = trainer_cli("config show --config " + run.config.string() + " --set optim.lrr=1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("optim.lrr: unknown key"), std::string::npos) << bad.output;

  const auto schema = trainer_cli("config schema");
  ASSERT_EQ(schema.exit_code, 0);
  EXPECT_EQ(schema.output, read_text(fs::path(TRAINER_SOURCE_DIR) / "configs" / "schema.json"))
      << "configs/schema.json is stale: regenerate it with `trainer config schema > configs/schema.json`";

  // A config that names the schema for its editor still loads.
  json c = json::parse(read_text(run.config));
  c["$schema"] = "../configs/schema.json";
  write_text(run.dir / "with_schema.json", c.dump());
  EXPECT_EQ(trainer_cli("config show --config " + (run.dir / "with_schema.json").string()).exit_code, 0);
}

}  // namespace
}  // namespace trainer

namespace trainer {
namespace {

using namespace trainer::testing;
using nlohmann::json;

TEST(BenchConfig, ModesReportSpeedSplitAndMemory) {
  SmallRun run;
  for (const char* mode : {"data", "model", "train"}) {
    const auto r =
        trainer_cli("bench --config " + run.config.string() + " --mode " + mode + " --steps 3 --warmup 1 --json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json j = json::parse(r.output);  // stdout holds only the JSON line
    EXPECT_GT(j["images_per_s"].get<double>(), 0) << mode;
    EXPECT_GT(j["peak_rss_mib"].get<double>(), 10) << mode;
    if (std::string(mode) != "data") {
      EXPECT_EQ(j["mode"], mode);
      EXPECT_EQ(j["batch"], 32);
      EXPECT_EQ(j["arch"], "mnist_cnn");
      EXPECT_GT(j["step_ms_median"].get<double>(), 0);
    }
    if (std::string(mode) == "train") {
      EXPECT_GE(j["data_wait_share"].get<double>(), 0);
      EXPECT_LE(j["data_wait_share"].get<double>(), 1);
      EXPECT_TRUE(j.contains("data_wait_ms_median"));
    }
  }
  const auto text = trainer_cli("bench --config " + run.config.string() + " --steps 2");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("training (data + model) (mnist_cnn, batch 32"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("% of the time"), std::string::npos) << text.output;
  EXPECT_EQ(trainer_cli("bench --config " + run.config.string() + " --mode everything").exit_code, 2);
  EXPECT_EQ(trainer_cli("bench --config " + (run.dir / "none.json").string()).exit_code, 2);
}

}  // namespace
}  // namespace trainer
