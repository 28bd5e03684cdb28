#include "trainer/platform/child_process.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "windows_support.hpp"
// After <winsock2.h>:
#include <ws2tcpip.h>

namespace trainer {

struct ChildProcess::State {
  HANDLE process = nullptr;
  HANDLE output = nullptr;                          // read end of its stdout + stderr; nullptr once it reached its end
  HANDLE interrupt = nullptr, terminate = nullptr;  // its stop events (stop_requests.cpp waits on them)
  std::optional<ChildExit> exit;
  ~State() {
    for (HANDLE h : {output, process, interrupt, terminate})
      if (h) CloseHandle(h);
  }
};

namespace {

// One job object for the launcher's children, made when the first starts and closed only when the launcher
// ends: KILL_ON_JOB_CLOSE then ends every child, however the launcher ended (a crash, Task Manager).
HANDLE children_job() {
  static const HANDLE job = [] {
    const HANDLE j = CreateJobObjectW(nullptr, nullptr);
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits{};
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    if (j) SetInformationJobObject(j, JobObjectExtendedLimitInformation, &limits, sizeof limits);
    return j;
  }();
  return job;
}

// One argument as CommandLineToArgvW (and the C runtime) will split it back: quoted when it has blanks or
// quotes, with the backslashes before a quote doubled.
std::wstring as_command_line_argument(const std::wstring& arg) {
  if (!arg.empty() && arg.find_first_of(L" \t\n\v\"") == std::wstring::npos) return arg;
  std::wstring out = L"\"";
  size_t backslashes = 0;
  for (const wchar_t ch : arg) {
    if (ch == L'\\') {
      ++backslashes;
      continue;
    }
    out.append(ch == L'"' ? backslashes * 2 + 1 : backslashes, L'\\');
    backslashes = 0;
    out.push_back(ch);
  }
  out.append(backslashes * 2, L'\\');
  out.push_back(L'"');
  return out;
}

// This process's environment block with `env` set on top (names compare without case, as Windows does).
std::wstring environment_with(const std::vector<std::pair<std::string, std::string>>& env) {
  std::wstring block;
  auto overridden = [&](const std::wstring& entry) {
    const auto eq = entry.find(L'=', 1);  // entries such as "=C:=C:\dir" start with '='
    const std::wstring name = entry.substr(0, eq);
    return std::any_of(env.begin(), env.end(),
                       [&](const auto& kv) { return _wcsicmp(windows::widen(kv.first).c_str(), name.c_str()) == 0; });
  };
  if (wchar_t* strings = GetEnvironmentStringsW()) {
    for (const wchar_t* p = strings; *p; p += wcslen(p) + 1)
      if (!overridden(p)) block.append(p).push_back(L'\0');
    FreeEnvironmentStringsW(strings);
  }
  for (const auto& [name, value] : env) block.append(windows::widen(name + "=" + value)).push_back(L'\0');
  block.push_back(L'\0');
  return block;
}

ChildExit describe(DWORD code) {
  ChildExit e;
  e.code = static_cast<int>(code);
  char text[64];
  if (code >= 0xC0000000u)
    std::snprintf(text, sizeof text, "crashed (exception 0x%08lX)", static_cast<unsigned long>(code));
  else std::snprintf(text, sizeof text, "exited with code %lu", static_cast<unsigned long>(code));
  e.how = text;
  return e;
}

}  // namespace

ChildProcess::ChildProcess() : s_(std::make_unique<State>()) {}
ChildProcess::ChildProcess(ChildProcess&&) noexcept = default;
ChildProcess& ChildProcess::operator=(ChildProcess&&) noexcept = default;
ChildProcess::~ChildProcess() = default;

ChildProcess ChildProcess::start_self(const std::vector<std::string>& args,
                                      const std::vector<std::pair<std::string, std::string>>& env) {
  std::wstring exe(32768, L'\0');
  exe.resize(GetModuleFileNameW(nullptr, exe.data(), static_cast<DWORD>(exe.size())));
  std::wstring command_line = as_command_line_argument(exe);
  for (size_t i = 1; i < args.size(); ++i) command_line += L" " + as_command_line_argument(windows::widen(args[i]));
  // Stop requests travel as two inherited events rather than console events, which need a shared console.
  ChildProcess child;
  SECURITY_ATTRIBUTES inheritable{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  child.s_->interrupt = CreateEventW(&inheritable, FALSE, FALSE, nullptr);
  child.s_->terminate = CreateEventW(&inheritable, FALSE, FALSE, nullptr);
  if (!child.s_->interrupt || !child.s_->terminate)
    throw std::runtime_error("cannot make an event: " + windows::last_error().message());
  auto with_events = env;
  with_events.emplace_back("TRAINER_STOP_EVENTS", std::to_string(reinterpret_cast<uintptr_t>(child.s_->interrupt)) +
                                                      "," +
                                                      std::to_string(reinterpret_cast<uintptr_t>(child.s_->terminate)));
  std::wstring environment = environment_with(with_events);

  // The children are started one at a time, and each write end is closed here right after its child has its
  // copy, so no child inherits another's pipe (which would keep that pipe open after its owner ended).
  HANDLE read_end = nullptr, write_end = nullptr;
  if (!CreatePipe(&read_end, &write_end, &inheritable, 0))
    throw std::runtime_error("cannot make a pipe: " + windows::last_error().message());
  SetHandleInformation(read_end, HANDLE_FLAG_INHERIT, 0);
  child.s_->output = read_end;

  STARTUPINFOW startup{};
  startup.cb = sizeof startup;
  startup.dwFlags = STARTF_USESTDHANDLES;
  startup.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  startup.hStdOutput = write_end;
  startup.hStdError = write_end;
  PROCESS_INFORMATION info{};
  // Its own console process group: the console's Ctrl-C reaches the launcher alone, which passes it on. Suspended until
  // it is in the job, so nothing it starts escapes the job.
  const DWORD flags = CREATE_UNICODE_ENVIRONMENT | CREATE_NEW_PROCESS_GROUP | CREATE_SUSPENDED;
  const BOOL started = CreateProcessW(exe.c_str(), command_line.data(), nullptr, nullptr, TRUE, flags,
                                      environment.data(), nullptr, &startup, &info);
  const auto error = windows::last_error();
  CloseHandle(write_end);
  // This child has its copies; the children started after it need none.
  SetHandleInformation(child.s_->interrupt, HANDLE_FLAG_INHERIT, 0);
  SetHandleInformation(child.s_->terminate, HANDLE_FLAG_INHERIT, 0);
  if (!started) throw std::runtime_error("cannot start " + windows::narrow(exe) + ": " + error.message());
  if (const HANDLE job = children_job()) AssignProcessToJobObject(job, info.hProcess);  // fails only where jobs
  ResumeThread(info.hThread);                                                           // cannot nest (before 8)
  CloseHandle(info.hThread);
  child.s_->process = info.hProcess;
  return child;
}

void ChildProcess::read_output(std::string& into) {
  char buffer[4096];
  while (s_->output) {
    DWORD available = 0;
    if (!PeekNamedPipe(s_->output, nullptr, 0, nullptr, &available, nullptr)) {  // broken: every writer is gone
      CloseHandle(s_->output);
      s_->output = nullptr;
      return;
    }
    if (available == 0) return;
    DWORD got = 0;
    if (!ReadFile(s_->output, buffer, std::min<DWORD>(available, sizeof buffer), &got, nullptr) || got == 0) return;
    into.append(buffer, got);
  }
}

const std::optional<ChildExit>& ChildProcess::poll() {
  DWORD code = 0;
  if (!s_->exit && WaitForSingleObject(s_->process, 0) == WAIT_OBJECT_0 && GetExitCodeProcess(s_->process, &code))
    s_->exit = describe(code);
  return s_->exit;
}

void ChildProcess::request_stop(int code) {
  if (!s_->exit) SetEvent(code == SIGINT ? s_->interrupt : s_->terminate);
}

void ChildProcess::kill() {
  if (!s_->exit) TerminateProcess(s_->process, 128 + 9);
}

void wait_for_children(const std::vector<const ChildProcess*>& children, const StopRequestQueue& stops,
                       std::chrono::milliseconds timeout) {
  // An anonymous pipe cannot be waited on: wake at least every 20 ms to pass output on.
  std::vector<HANDLE> handles{reinterpret_cast<HANDLE>(stops.waitable())};
  for (const auto* c : children)
    if (!c->s_->exit) handles.push_back(c->s_->process);
  const auto ms = static_cast<DWORD>(std::min<long long>(timeout.count(), 20));
  WaitForMultipleObjects(static_cast<DWORD>(std::min<size_t>(handles.size(), MAXIMUM_WAIT_OBJECTS)), handles.data(),
                         FALSE, ms);
}

ChildExit run_shell_command(const std::string& command, const std::function<void(const uint8_t*, size_t)>& sink) {
  // _wpopen runs cmd.exe /c with the command as UTF-16, so any script in it reaches the shell; "b": the bytes as
  // they are (a tar, not text).
  FILE* out = _wpopen(windows::widen(command).c_str(), L"rb");
  if (!out) throw std::runtime_error("cannot start cmd.exe: error " + std::to_string(GetLastError()));
  std::vector<uint8_t> buffer(size_t{1} << 20);
  try {
    for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), out)) > 0;) sink(buffer.data(), n);
  } catch (...) {
    _pclose(out);
    throw;
  }
  const int code = _pclose(out);
  if (code == -1) throw std::runtime_error("cannot wait for the command");
  return describe(static_cast<DWORD>(code));
}

std::optional<int> free_loopback_port() {
  WSADATA data;
  if (WSAStartup(MAKEWORD(2, 2), &data) != 0) return std::nullopt;
  std::optional<int> port;
  const SOCKET s = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int size = sizeof a;
  if (s != INVALID_SOCKET && bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &size) == 0)
    port = ntohs(a.sin_port);
  if (s != INVALID_SOCKET) closesocket(s);
  WSACleanup();
  return port;
}

}  // namespace trainer
