#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>

#include "trainer/config/config.hpp"
#include "trainer/config/load.hpp"
#include "trainer/config/schema.hpp"
#include "trainer/engine/confusion.hpp"
#include "trainer/plot/chart.hpp"
#include "trainer/plot/curves.hpp"

namespace trainer {
namespace {

torch::Tensor matrix(std::vector<int64_t> cells, int64_t n) { return torch::tensor(cells).view({n, n}); }

TEST(Confusion, PerClassPairsAndShownClasses) {
  // true 0: 5 right, 3 -> 1;  true 1: 4 right, 1 -> 2;  true 2: 2 right, 3 -> 0, 3 -> 1
  const auto m = matrix({5, 3, 0, 0, 4, 1, 3, 3, 2}, 3);
  const auto s = per_class_scores(m);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].images, 8);
  EXPECT_EQ(s[0].correct, 5);
  EXPECT_DOUBLE_EQ(s[2].accuracy(), 2.0 / 8.0);
  const auto pairs = most_confused_pairs(m, 2);
  ASSERT_EQ(pairs.size(), 2u);  // three cells of 3; ties go by (truth, predicted)
  EXPECT_EQ(pairs[0].truth, 0);
  EXPECT_EQ(pairs[0].predicted, 1);
  EXPECT_EQ(pairs[1].truth, 2);
  EXPECT_EQ(pairs[1].predicted, 0);
  EXPECT_EQ(most_confused_pairs(m, 100).size(), 4u);  // zero cells are not pairs
  // errors: class 0: 3 + 3 = 6, class 1: 1 + 3 + 3 = 7, class 2: 6 + 1 = 7
  EXPECT_EQ(most_confused_classes(m, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(most_confused_classes(m, 5), (std::vector<int64_t>{0, 1, 2}));
}

TEST(Chart, NiceTicksAndLabels) {
  EXPECT_EQ(nice_ticks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  const auto t = nice_ticks(13, 987, 5);
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.front(), 200);
  EXPECT_EQ(t[1] - t[0], 200);
  EXPECT_EQ(tick_label(0.25, 0.05), "0.25");
  EXPECT_EQ(tick_label(12000, 2000), "12000");
  EXPECT_EQ(tick_label(0.00002, 0.00001), "2e-05");
}

TEST(Chart, CurvesDrawEverySeries) {
  std::vector<MetricsRow> rows;
  auto add = [&](const char* kind, int64_t epoch, int64_t step, double lr, double loss, double top1, double top5,
                 double images_per_s) {
    MetricsRow& r = rows.emplace_back(kind, epoch, step);
    r.lr = lr;
    r.loss = loss;
    r.top1 = top1;
    r.top5 = top5;
    r.images_per_s = images_per_s;
  };
  for (int64_t step = 10; step <= 100; step += 10)
    add("train", 1 + (step - 1) / 50, step, 0.1 * (1 - step / 200.0), 2.0 - step / 100.0, 0.5, MetricsRow::none, 900);
  add("epoch", 1, 50, 0.08, 1.6, 0.4, MetricsRow::none, 950);
  add("eval", 1, 50, 0.08, 1.5, 0.45, 0.9, 2000);
  add("epoch", 2, 100, 0.05, 1.1, 0.6, MetricsRow::none, 950);
  add("eval", 2, 100, 0.05, 1.2, 0.62, 0.95, 2000);
  const cv::Mat img = draw_curves(rows, "test run");
  EXPECT_EQ(img.cols, 1600);
  EXPECT_EQ(img.rows, 44 + 2 * 480);
  // Pixels in each series colour: the curves are really drawn (and a blank chart would fail).
  auto count = [&](const cv::Scalar& c) {
    cv::Mat mask;
    cv::inRange(img, c - cv::Scalar(2, 2, 2), c + cv::Scalar(2, 2, 2), mask);
    return cv::countNonZero(mask);
  };
  EXPECT_GT(count(kBlue), 500);
  EXPECT_GT(count(kOrange), 300);
  EXPECT_GT(count(kVermillion), 200);
  EXPECT_GT(count(kGreen), 300);
  EXPECT_EQ(count(kPurple), 0);  // no EMA rows, no EMA curve
}

TEST(Chart, HeatMapColoursByShareOfTheWholeRow) {
  const std::vector<std::vector<int64_t>> counts{{1, 0}, {0, 1}};
  const std::vector<std::string> names{"a", "b"};
  const cv::Mat own = draw_heat_map(counts, names, "t", "true", "predicted");
  const cv::Mat whole = draw_heat_map(counts, names, "t", "true", "predicted", {4, 1});
  // Cell (0, 0), away from its label: share 1 of the shown row, 1/4 of the whole row.
  auto corner = [](const cv::Mat& img) {
    for (int x = 0; x < img.cols; ++x) {  // the first column that is not white on the first cell's row
      const auto p = img.at<cv::Vec3b>(60 + 3, x);
      if (p != cv::Vec3b(255, 255, 255) && x > 20) return img.at<cv::Vec3b>(60 + 3, x + 3);
    }
    return cv::Vec3b();
  };
  EXPECT_EQ(corner(own), cv::Vec3b(120, 48, 8));  // the darkest blue
  EXPECT_NEAR(corner(whole)[0], 255 + (120 - 255) * 0.25, 1.0);
  EXPECT_NEAR(corner(whole)[2], 255 + (8 - 255) * 0.25, 1.0);
}

// Walks the resolved default config and the schema together: same keys, types and defaults.
void expect_schema_matches(const nlohmann::json& value, const nlohmann::json& schema, const std::string& path) {
  ASSERT_TRUE(schema.contains("properties")) << path;
  for (const auto& [key, v] : value.items()) {
    ASSERT_TRUE(schema["properties"].contains(key)) << path + key << " missing from the schema";
    // A section that may also be a bare name (data.augment.auto_augment): its object is the anyOf's second form.
    const auto& p =
        schema["properties"][key].contains("anyOf") ? schema["properties"][key]["anyOf"][1] : schema["properties"][key];
    // A map of names to numbers (optim.lr_mult) is an object field, not a section.
    if (v.is_object() && p.contains("additionalProperties") && p["additionalProperties"].is_object()) {
      EXPECT_EQ(p["type"], "object") << path + key;
      EXPECT_EQ(p["additionalProperties"]["type"], "number") << path + key;
      EXPECT_EQ(p["default"], v) << path + key;
      continue;
    }
    if (v.is_object()) {
      EXPECT_EQ(p["type"], "object") << path + key;
      EXPECT_EQ(p["additionalProperties"], false) << path + key;
      expect_schema_matches(v, p, path + key + ".");
      continue;
    }
    EXPECT_FALSE(p["description"].get<std::string>().empty()) << path + key;
    // "type" is one name, or a list of them for keys that take true, false or "auto".
    const nlohmann::json types = p["type"].is_array() ? p["type"] : nlohmann::json::array({p["type"]});
    const char* expected = v.is_boolean()          ? "boolean"
                           : v.is_number_integer() ? "integer"
                           : v.is_number_float()   ? "number"
                           : v.is_array()          ? "array"
                                                   : "string";
    EXPECT_NE(std::find(types.begin(), types.end(), expected), types.end()) << path + key << " is " << expected;
    EXPECT_EQ(p["default"], v) << path + key;
  }
  for (const auto& [key, p] : schema["properties"].items()) {
    if (key != "extends" && key != "$schema") {
      EXPECT_TRUE(value.contains(key)) << path + key << " only in the schema";
    }
  }
}

TEST(ConfigSchema, CoversEveryKeyWithTypeDefaultRangeAndChoices) {
  const auto schema = config_schema();
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
  expect_schema_matches(config_to_json(Config{}), schema, "");
  const auto& optim = schema["properties"]["optim"]["properties"];
  EXPECT_EQ(optim["lr"]["exclusiveMinimum"], 0.0);
  EXPECT_EQ(optim["momentum"]["minimum"], 0.0);
  EXPECT_EQ(optim["name"]["enum"], (nlohmann::json{"sgd", "adamw"}));
  EXPECT_EQ(schema["properties"]["data"]["properties"]["kind"]["enum"],
            (nlohmann::json{"mnist", "imagenet", "synthetic", "shards"}));
}

}  // namespace
}  // namespace trainer
