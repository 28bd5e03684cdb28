#include "trainer/platform/process.hpp"

#include <cstdlib>

#include "windows_support.hpp"
// After <windows.h>:
#include <psapi.h>
#include <shellapi.h>

namespace trainer {

int process_id() { return static_cast<int>(GetCurrentProcessId()); }

std::string host_name() {
  wchar_t name[256] = {};
  DWORD size = static_cast<DWORD>(std::size(name));
  if (!GetComputerNameExW(ComputerNameDnsHostname, name, &size) || size == 0) return "localhost";
  std::string s = windows::narrow(std::wstring(name, size));
  for (char& ch : s)
    if (ch == '/' || ch == '\\' || ch == ' ') ch = '_';
  return s;
}

bool stdout_is_terminal() {
  DWORD mode = 0;
  return GetConsoleMode(GetStdHandle(STD_OUTPUT_HANDLE), &mode) != 0;
}

std::vector<std::string> own_command_line() {
  int count = 0;
  wchar_t** wide = CommandLineToArgvW(GetCommandLineW(), &count);
  std::vector<std::string> args;
  for (int i = 0; wide && i < count; ++i) args.push_back(windows::narrow(wide[i]));
  if (wide) LocalFree(wide);
  return args;
}

void set_environment_default(const std::string& name, const std::string& value) {
  // The C runtime's copy of the environment, which getenv() reads (LibTorch's and CUDA's reads included).
  if (std::getenv(name.c_str()) == nullptr) _putenv_s(name.c_str(), value.c_str());
}

double peak_resident_mib() {
  PROCESS_MEMORY_COUNTERS counters{};
  if (!GetProcessMemoryInfo(GetCurrentProcess(), &counters, sizeof counters)) return 0.0;
  return static_cast<double>(counters.PeakWorkingSetSize) / (1024.0 * 1024.0);
}

int64_t page_faults() {
  PROCESS_MEMORY_COUNTERS counters{};
  if (!GetProcessMemoryInfo(GetCurrentProcess(), &counters, sizeof counters)) return -1;
  return static_cast<int64_t>(counters.PageFaultCount);  // soft and hard faults alike
}

std::vector<std::string> loaded_library_paths() {
  HMODULE modules[1024];
  DWORD needed = 0;
  std::vector<std::string> paths;
  if (!EnumProcessModules(GetCurrentProcess(), modules, sizeof modules, &needed)) return paths;
  for (DWORD i = 0; i < needed / sizeof(HMODULE) && i < std::size(modules); ++i) {
    wchar_t path[MAX_PATH * 4];
    const DWORD n = GetModuleFileNameW(modules[i], path, static_cast<DWORD>(std::size(path)));
    if (n > 0) paths.push_back(windows::narrow(std::wstring(path, n)));
  }
  return paths;
}

void keep_freed_memory_for_reuse() {}  // the Windows heap has no such tunables

void* load_cuda_driver() { return reinterpret_cast<void*>(LoadLibraryW(L"nvcuda.dll")); }

void* library_symbol(void* library, const char* name) {
  return library ? reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(library), name)) : nullptr;
}

}  // namespace trainer
