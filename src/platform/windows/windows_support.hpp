// What the Windows half of the platform layer shares: <windows.h> with its macros kept small, UTF-8 <-> UTF-16
// at every call, long paths, and GetLastError() as a std::error_code whose message is the system's own text.
#pragma once

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
// <winsock2.h> before <windows.h>, which would otherwise pull in the old winsock.h (a block of its own, so that
// include sorting keeps the order).
#include <winsock2.h>

#include <windows.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace trainer::windows {

inline std::wstring widen(const std::string& utf8) {
  if (utf8.empty()) return {};
  const int n = MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), nullptr, 0);
  std::wstring out(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), out.data(), n);
  return out;
}

inline std::string narrow(const std::wstring& utf16) {
  if (utf16.empty()) return {};
  const int n =
      WideCharToMultiByte(CP_UTF8, 0, utf16.data(), static_cast<int>(utf16.size()), nullptr, 0, nullptr, nullptr);
  std::string out(static_cast<size_t>(n), '\0');
  WideCharToMultiByte(CP_UTF8, 0, utf16.data(), static_cast<int>(utf16.size()), out.data(), n, nullptr, nullptr);
  return out;
}

// The path as the wide calls want it. Past MAX_PATH (260) they need an absolute path with the "\\?\" prefix
// (which also turns off their '/' handling, hence the backslashes); shorter paths go as they are.
inline std::wstring long_path(const std::filesystem::path& p) {
  std::wstring text = p.wstring();
  if (text.size() < 248 || text.rfind(L"\\\\?\\", 0) == 0) return text;
  std::error_code ec;
  std::wstring absolute = std::filesystem::absolute(p, ec).make_preferred().wstring();
  if (ec) return text;
  if (absolute.rfind(L"\\\\", 0) == 0) return L"\\\\?\\UNC\\" + absolute.substr(2);  // \\server\share\...
  return L"\\\\?\\" + absolute;
}

// GetLastError() codes with FormatMessageW's text, in UTF-8 ("The disk is full.").
class SystemErrorCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "windows"; }
  std::string message(int code) const override {
    wchar_t* text = nullptr;
    const DWORD n =
        FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                       nullptr, static_cast<DWORD>(code), 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
    std::wstring message = n ? std::wstring(text, n) : L"error " + std::to_wstring(code);
    if (text) LocalFree(text);
    while (!message.empty() && (message.back() == L'\n' || message.back() == L'\r' || message.back() == L' '))
      message.pop_back();
    return narrow(message);
  }
};

inline const std::error_category& system_errors() {
  static const SystemErrorCategory category;
  return category;
}

inline std::error_code last_error() { return {static_cast<int>(GetLastError()), system_errors()}; }

}  // namespace trainer::windows
