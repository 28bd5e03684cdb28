#include "trainer/config/schema.hpp"

#include <string>
#include <type_traits>
#include <vector>

#include "trainer/config/config.hpp"

namespace trainer {

namespace {

// Visits a default-constructed struct: each field's current value is its default.
class SchemaWriter {
 public:
  template <class T>
  void field(const char* key, const T& value, const char* doc, const Range& range = Range::any()) {
    nlohmann::json p = {{"description", doc}, {"default", value}};
    if constexpr (std::is_same_v<T, bool>) {
      p["type"] = "boolean";
    } else if constexpr (std::is_integral_v<T>) {
      p["type"] = "integer";
    } else if constexpr (std::is_floating_point_v<T>) {
      p["type"] = "number";
    } else if constexpr (std::is_same_v<T, std::string>) {
      p["type"] = "string";
    } else if constexpr (std::is_same_v<T, std::vector<double>>) {
      p["type"] = "array";
      p["items"] = {{"type", "number"}};
    } else if constexpr (std::is_same_v<T, std::map<std::string, double>>) {
      p["type"] = "object";
      p["additionalProperties"] = {{"type", "number"}};
    } else {
      static_assert(std::is_same_v<T, std::vector<std::string>>, "a field type without a schema");
      p["type"] = "array";
      p["items"] = {{"type", "string"}};
    }
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (range.min) p[range.min_exclusive ? "exclusiveMinimum" : "minimum"] = *range.min;
      if (range.max) p["maximum"] = *range.max;
    }
    add(key, std::move(p));
  }

  template <class E>
  void choice(const char* key, const E& value, const EnumTable<E>& table, const char* doc) {
    // Names "true" and "false" are JSON booleans (see Switch).
    auto as_json = [](const std::string& name) {
      if (is_integer_name(name)) return nlohmann::json(std::stoll(name));
      return is_boolean_name(name) ? nlohmann::json(name == "true") : nlohmann::json(name);
    };
    nlohmann::json names = nlohmann::json::array();
    bool booleans = false, integers = false;
    for (const auto& entry : table) {
      names.push_back(as_json(entry.first));
      booleans = booleans || is_boolean_name(entry.first);
      integers = integers || is_integer_name(entry.first);
    }
    add(key, {{"description", doc},
              {"type", booleans   ? nlohmann::json::array({"string", "boolean"})
                       : integers ? nlohmann::json::array({"string", "integer"})
                                  : nlohmann::json("string")},
              {"enum", names},
              {"default", as_json(enum_name(table, value))}});
  }

  template <class S>
  void section(const char* key, S& value) {
    SchemaWriter sub;
    value.visit(sub);
    add(key, sub.take());
  }

  // The object, or its "name" alone as a string.
  template <class S>
  void named_section(const char* key, S& value) {
    SchemaWriter sub;
    value.visit(sub);
    nlohmann::json object = sub.take();
    nlohmann::json name = object["properties"]["name"];
    name.erase("default");
    add(key, {{"description", "a name, or an object with \"name\" and parameters"},
              {"anyOf", nlohmann::json::array({name, object})}});
  }

  nlohmann::json take() {
    return {{"type", "object"}, {"properties", std::move(properties_)}, {"additionalProperties", false}};
  }

 private:
  void add(const char* key, nlohmann::json p) { properties_[key] = std::move(p); }
  nlohmann::json properties_ = nlohmann::json::object();
};

}  // namespace

nlohmann::json config_schema() {
  Config defaults;
  SchemaWriter writer;
  defaults.visit(writer);
  nlohmann::json schema = writer.take();
  schema["properties"]["extends"] = {
      {"type", "string"},
      {"description", "parent config file (relative to this one) whose keys this file overrides, object by object"}};
  schema["properties"]["$schema"] = {{"type", "string"},
                                     {"description", "this schema, for editors (e.g. \"schema.json\"); ignored"}};
  nlohmann::json out = {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
                        {"$id", "trainer-config.schema.json"},
                        {"title", "trainer config"},
                        {"description",
                         "A trainer run: `trainer --config FILE`. Every key is optional; the "
                         "defaults are shown."}};
  out.update(schema);
  return out;
}

}  // namespace trainer
