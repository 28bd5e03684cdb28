// Visitors over the field tables of config.hpp:
//   JsonReader fills a struct from JSON, naming the JSON path in every error and rejecting unknown keys;
//   JsonWriter turns a struct back into JSON (the resolved config written to runs and checkpoints).
//   Config c; read_json(j, c);  nlohmann::json out = to_json_value(c);
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "trainer/config/fields.hpp"
#include "trainer/util/error.hpp"

namespace trainer {

namespace detail {
// Typed conversions; each throws ConfigError("<path>: expected ..., got ...").
void read_scalar(const nlohmann::json& j, const std::string& path, bool& out);
void read_scalar(const nlohmann::json& j, const std::string& path, int64_t& out);
void read_scalar(const nlohmann::json& j, const std::string& path, double& out);
void read_scalar(const nlohmann::json& j, const std::string& path, std::string& out);
void read_scalar(const nlohmann::json& j, const std::string& path, std::vector<double>& out);
void read_scalar(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out);
void read_scalar(const nlohmann::json& j, const std::string& path, std::map<std::string, double>& out);
void check_range(const std::string& path, double value, const Range& range);
std::string read_enum_name(const nlohmann::json& j, const std::string& path, const std::vector<std::string>& valid);
void reject_unknown_keys(const nlohmann::json& object, const std::string& path, const std::vector<std::string>& known);
std::string describe(const nlohmann::json& j);  // a short rendering of a JSON value for messages
}  // namespace detail

class JsonReader {
 public:
  // `path` is the prefix of this object's keys in messages, e.g. "optim." (empty at the top level).
  JsonReader(const nlohmann::json& object, std::string path) : object_(object), path_(std::move(path)) {
    if (!object_.is_object())
      throw ConfigError((path_.empty() ? std::string("top level") : path_.substr(0, path_.size() - 1)) +
                        ": expected an object, got " + detail::describe(object_));
  }

  template <class T>
  void field(const char* key, T& value, const char* /*doc*/, const Range& range = Range::any()) {
    known_.push_back(key);
    const auto it = object_.find(key);
    if (it == object_.end()) return;
    detail::read_scalar(*it, path_ + key, value);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
      detail::check_range(path_ + key, static_cast<double>(value), range);
  }

  template <class E>
  void choice(const char* key, E& value, const EnumTable<E>& table, const char* /*doc*/) {
    known_.push_back(key);
    const auto it = object_.find(key);
    if (it == object_.end()) return;
    std::vector<std::string> names;
    for (const auto& entry : table) names.push_back(entry.first);
    const std::string name = detail::read_enum_name(*it, path_ + key, names);
    for (const auto& entry : table)
      if (entry.first == name) value = entry.second;
  }

  template <class S>
  void section(const char* key, S& value) {
    known_.push_back(key);
    const auto it = object_.find(key);
    if (it == object_.end()) return;
    JsonReader sub(*it, path_ + key + ".");
    value.visit(sub);
    sub.finish();
  }

  // A section that may also be written as a bare name: "randaugment" reads as {"name": "randaugment"}.
  template <class S>
  void named_section(const char* key, S& value) {
    const auto it = object_.find(key);
    if (it != object_.end() && it->is_string()) {
      known_.push_back(key);
      const nlohmann::json object = {{"name", *it}};
      JsonReader sub(object, path_ + key + ".");
      value.visit(sub);
      sub.finish();
      return;
    }
    section(key, value);
  }

  void finish() const { detail::reject_unknown_keys(object_, path_, known_); }

 private:
  const nlohmann::json& object_;
  std::string path_;
  std::vector<std::string> known_;
};

class JsonWriter {
 public:
  template <class T>
  void field(const char* key, const T& value, const char*, const Range& = Range::any()) {
    out_[key] = value;
  }
  template <class E>
  void choice(const char* key, const E& value, const EnumTable<E>& table, const char*) {
    const std::string& name = enum_name(table, value);
    if (is_boolean_name(name)) out_[key] = name == "true";
    else if (is_integer_name(name)) out_[key] = std::stoll(name);
    else out_[key] = name;
  }
  template <class S>
  void section(const char* key, S& value) {
    JsonWriter sub;
    value.visit(sub);
    out_[key] = std::move(sub.out_);
  }
  template <class S>
  void named_section(const char* key, S& value) {
    section(key, value);
  }
  nlohmann::json take() { return std::move(out_); }

 private:
  nlohmann::json out_ = nlohmann::json::object();
};

template <class S>
void read_json(const nlohmann::json& j, S& value) {
  JsonReader reader(j, "");
  value.visit(reader);
  reader.finish();
}

template <class S>
nlohmann::json to_json_value(const S& value) {
  JsonWriter writer;
  const_cast<S&>(value).visit(writer);  // visit() only reads through a JsonWriter
  return writer.take();
}

}  // namespace trainer
