#include "trainer/config/json_fields.hpp"

#include <algorithm>

#include <cmath>

#include "trainer/util/text.hpp"

namespace trainer::detail {

using nlohmann::json;

std::string describe(const json& j) {
  std::string text = j.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

namespace {
[[noreturn]] void type_error(const std::string& path, const std::string& expected, const json& got) {
  throw ConfigError(path + ": expected " + expected + ", got " + describe(got));
}
}  // namespace

void read_scalar(const json& j, const std::string& path, bool& out) {
  if (!j.is_boolean()) type_error(path, "true or false", j);
  out = j.get<bool>();
}

void read_scalar(const json& j, const std::string& path, int64_t& out) {
  if (j.is_number_integer()) {
    out = j.get<int64_t>();
    return;
  }
  // 1e3 or 2.0 are integers written as floats; 2.5 is not.
  if (j.is_number_float()) {
    const double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
      out = static_cast<int64_t>(d);
      return;
    }
  }
  type_error(path, "an integer", j);
}

void read_scalar(const json& j, const std::string& path, double& out) {
  if (!j.is_number()) type_error(path, "a number", j);
  out = j.get<double>();
}

void read_scalar(const json& j, const std::string& path, std::string& out) {
  if (!j.is_string()) type_error(path, "a string", j);
  out = j.get<std::string>();
}

void read_scalar(const json& j, const std::string& path, std::vector<double>& out) {
  if (!j.is_array()) type_error(path, "an array of numbers", j);
  out.clear();
  for (size_t i = 0; i < j.size(); ++i) {
    double v = 0;
    read_scalar(j[i], path + "[" + std::to_string(i) + "]", v);
    out.push_back(v);
  }
}

void read_scalar(const json& j, const std::string& path, std::vector<std::string>& out) {
  if (!j.is_array()) type_error(path, "an array of strings", j);
  out.clear();
  for (size_t i = 0; i < j.size(); ++i) {
    std::string v;
    read_scalar(j[i], path + "[" + std::to_string(i) + "]", v);
    out.push_back(v);
  }
}

void read_scalar(const json& j, const std::string& path, std::map<std::string, double>& out) {
  if (!j.is_object()) type_error(path, "an object of numbers", j);
  out.clear();
  for (const auto& [key, value] : j.items()) read_scalar(value, path + "." + key, out[key]);
}

void check_range(const std::string& path, double value, const Range& range) {
  const bool low = range.min && (range.min_exclusive ? value <= *range.min : value < *range.min);
  const bool high = range.max && value > *range.max;
  if (!low && !high) return;
  std::string expected;
  if (range.min && range.max)
    expected = "a number in [" + format_number(*range.min) + ", " + format_number(*range.max) + "]";
  else if (range.min)
    expected = std::string("a number ") + (range.min_exclusive ? "> " : ">= ") + format_number(*range.min);
  else expected = "a number <= " + format_number(*range.max);
  throw ConfigError(path + ": expected " + expected + ", got " + format_number(value));
}

std::string read_enum_name(const json& j, const std::string& path, const std::vector<std::string>& valid) {
  // Names may be booleans ("true", "false") or integers ("0": random erasing's value) written bare in JSON.
  const bool integer_names = std::any_of(valid.begin(), valid.end(), is_integer_name);
  if (!j.is_string() && !j.is_boolean() && !(integer_names && j.is_number_integer()))
    type_error(path, "one of " + join(valid), j);
  const auto name = j.is_boolean()          ? std::string(j.get<bool>() ? "true" : "false")
                    : j.is_number_integer() ? j.dump()
                                            : j.get<std::string>();
  for (const auto& v : valid)
    if (v == name) return name;
  const std::string guess = closest_match(name, valid);
  throw ConfigError(path + ": unknown value \"" + name + "\"" +
                    (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") + " (valid: " + join(valid) + ")");
}

void reject_unknown_keys(const json& object, const std::string& path, const std::vector<std::string>& known) {
  for (const auto& item : object.items()) {
    bool found = false;
    for (const auto& k : known) found = found || k == item.key();
    if (found) continue;
    const std::string guess = closest_match(item.key(), known);
    throw ConfigError(path + item.key() + ": unknown key" + (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") +
                      " (valid keys" + (path.empty() ? "" : " in " + path.substr(0, path.size() - 1)) + ": " +
                      join(known) + ")");
  }
}

}  // namespace trainer::detail
