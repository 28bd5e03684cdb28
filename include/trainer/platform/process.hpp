// Facts about this process and its terminal, asked of the operating system in one place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

int process_id();

// The machine's name, with '/', '\\' and ' ' made '_' so it can stand in a file name; "localhost" when unknown.
std::string host_name();

// Whether standard output is a terminal (or a Windows console), not a file or a pipe.
bool stdout_is_terminal();

// This process's command line as it was started, UTF-8 (Linux: /proc/self/cmdline; Windows: GetCommandLineW).
std::vector<std::string> own_command_line();

// Sets an environment variable unless the user already has.
void set_environment_default(const std::string& name, const std::string& value);

// The most memory this process has held resident so far, in MiB (0 when unknown).
double peak_resident_mib();

// The page faults this process has taken so far, minor and major (-1 when unknown). Memory touched for the first
// time, or again after being handed back to the system, faults once per page, so a steady state that allocates
// nothing takes next to none: `trainer bench data` reports them per batch.
int64_t page_faults();

// The files of the shared libraries mapped into this process (empty where unknown).
std::vector<std::string> loaded_library_paths();

// Keeps glibc's malloc from returning tensor memory to the kernel after every step. By default large blocks are
// mmap'd and unmapped, and the heap top is trimmed, so each step page-faults its activations, gradients and input
// batches in afresh: measured 40% of a resnet50 CPU step, and most of the float conversion of a 224 px batch, on 2
// cores. Keeping every block in the heap lets the next step reuse it; the process's RSS then stays at its peak,
// which a training run reaches every step anyway. Nothing on other C libraries, or when the user set MALLOC_*.
void keep_freed_memory_for_reuse();

// The CUDA driver's library (libcuda.so.1, nvcuda.dll), loaded for the rest of the process, or nullptr when this
// machine has none; and a function of it by name (nullptr when missing). CPU builds reach the driver this way.
void* load_cuda_driver();
void* library_symbol(void* library, const char* name);

}  // namespace trainer
