#include "trainer/distributed/world.hpp"

#include <cctype>

#include "trainer/util/error.hpp"

namespace trainer {

namespace {

constexpr int kDefaultPort = 29500;  // torchrun's

}  // namespace

int64_t environment_integer(const EnvironmentLookup& env, const std::string& name, int64_t fallback, int64_t low,
                            int64_t high) {
  const auto text = env(name);
  if (!text) return fallback;
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text->size())
    throw UsageError("environment: " + name + "=" + *text + " is not a whole number");
  if (value < low || value > high)
    throw UsageError("environment: " + name + "=" + *text + " is out of range (" + std::to_string(low) + " to " +
                     std::to_string(high) + ")");
  return value;
}

std::optional<int> master_port(const EnvironmentLookup& env) {
  if (!env("MASTER_PORT")) return std::nullopt;
  return static_cast<int>(environment_integer(env, "MASTER_PORT", 0, 1, 65535));
}

namespace {

// SLURM_NTASKS_PER_NODE reads "8" or "8(x4)" or "8(x2),4": the first node's count.
int64_t first_count(const EnvironmentLookup& env, const std::string& name, int64_t fallback) {
  const auto text = env(name);
  if (!text) return fallback;
  const std::string head = text->substr(0, text->find_first_of("(,"));
  return environment_integer([&](const std::string&) { return std::optional<std::string>(head); }, name, fallback, 1,
                             1 << 20);
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[') ++depth;
    if (nodelist[end] == ']') --depth;
    if (nodelist[end] == ',' && depth == 0) break;
  }
  const std::string entry = nodelist.substr(0, end);
  const size_t open = entry.find('[');
  if (open == std::string::npos) return entry;
  // "gpu[07-09,12]": the prefix and the first number of the range, zero padding kept.
  size_t digits = open + 1;
  while (digits < entry.size() && std::isdigit(static_cast<unsigned char>(entry[digits]))) ++digits;
  return entry.substr(0, open) + entry.substr(open + 1, digits - open - 1);
}

World world_from_environment(const EnvironmentLookup& env) {
  World w;
  constexpr int64_t kMaxWorld = 1 << 20;
  if (env("WORLD_SIZE")) {
    w.launcher = "torchrun";
    w.size = environment_integer(env, "WORLD_SIZE", 1, 1, kMaxWorld);
    w.rank = environment_integer(env, "RANK", 0, 0, w.size - 1);
    w.local_size = environment_integer(env, "LOCAL_WORLD_SIZE", 1, 1, w.size);
    w.local_rank = environment_integer(env, "LOCAL_RANK", 0, 0, w.local_size - 1);
    w.master_addr = env("MASTER_ADDR").value_or("");
    w.agent_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    w.restart_count = environment_integer(env, "TORCHELASTIC_RESTART_COUNT", 0, 0, kMaxWorld);
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    w.launcher = "slurm";
    w.size = environment_integer(env, "SLURM_NTASKS", 1, 1, kMaxWorld);
    w.rank = environment_integer(env, "SLURM_PROCID", 0, 0, w.size - 1);
    w.local_size = first_count(env, "SLURM_NTASKS_PER_NODE", 1);
    w.local_rank = environment_integer(env, "SLURM_LOCALID", 0, 0, kMaxWorld);
    w.master_addr = env("MASTER_ADDR").value_or("");
    if (w.master_addr.empty()) {
      const auto nodes = env("SLURM_STEP_NODELIST") ? env("SLURM_STEP_NODELIST") : env("SLURM_JOB_NODELIST");
      if (nodes) w.master_addr = first_slurm_host(*nodes);
    }
  } else {
    return w;
  }
  w.port = static_cast<int>(environment_integer(env, "MASTER_PORT", kDefaultPort, 1, 65535));
  if (w.size > 1 && w.master_addr.empty())
    throw UsageError("environment: " + std::string(w.launcher == "slurm" ? "SLURM_NTASKS" : "WORLD_SIZE") + "=" +
                     std::to_string(w.size) + " but MASTER_ADDR is not set: set MASTER_ADDR and MASTER_PORT to the " +
                     "address and a free port of the rank-0 host");
  return w;
}

}  // namespace trainer
