#include "trainer/platform/process.hpp"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace trainer {

int process_id() { return static_cast<int>(::getpid()); }

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || !name[0]) return "localhost";
  std::string s(name);
  for (char& ch : s)
    if (ch == '/' || ch == '\\' || ch == ' ') ch = '_';
  return s;
}

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0, end = 0; start < raw.size(); start = end + 1) {
    end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    args.push_back(raw.substr(start, end - start));
  }
  return args;
}

void set_environment_default(const std::string& name, const std::string& value) {
  ::setenv(name.c_str(), value.c_str(), /*overwrite=*/0);
}

double peak_resident_mib() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0.0;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

int64_t page_faults() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  return static_cast<int64_t>(usage.ru_minflt) + static_cast<int64_t>(usage.ru_majflt);
}

std::vector<std::string> loaded_library_paths() {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> paths;
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (paths.empty() || paths.back() != path) paths.push_back(std::move(path));
  }
  return paths;
}

void keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_"})
    if (std::getenv(name) != nullptr) return;  // the user tunes glibc themselves
  // No block gets its own mapping, however large: a 224 px float batch of 64 (38 MiB) or a ResNet-50
  // activation would otherwise be mapped, page-faulted in and unmapped again on every step, which costs
  // more than the arithmetic on some machines. Large blocks now come from the heap (glibc falls back to
  // another arena, or to mmap, when a heap cannot grow).
  ::mallopt(M_MMAP_MAX, 0);
  // Freed memory stays in the heap for the next step instead of being returned and faulted in again.
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

void* load_cuda_driver() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return lib ? lib : ::dlopen("libcuda.so.1", RTLD_NOW);
}

void* library_symbol(void* library, const char* name) { return library ? ::dlsym(library, name) : nullptr; }

}  // namespace trainer
