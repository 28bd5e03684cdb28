// Force-included by scripts/lanes/windows.sh when it compiles the trainer's sources with MinGW-w64 against
// LibTorch's headers, which assume MSVC on Windows and glibc elsewhere in one spot each:
//  - c10/macros/Macros.h's CUDA_KERNEL_ASSERT calls glibc's __assert_fail, which MinGW does not declare (its
//    own declaration there exists only with NDEBUG);
//  - torch/csrc/jit/ir/ir.h defines inline member functions marked TORCH_API (dllimport), which MSVC accepts
//    and GCC refuses: the lane compiles against a copy without those markers (made from the installed header).
// Neither changes what the trainer's own code means; an MSVC build needs neither.
#pragma once
#if defined(__MINGW32__) && defined(__cplusplus)
extern "C" void __assert_fail(const char* assertion, const char* file, unsigned int line,
                              const char* function) throw() __attribute__((__noreturn__));
#endif
