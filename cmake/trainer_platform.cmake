# Two libraries that need no LibTorch, so the Windows lane builds them and their tests with MinGW and runs them
# under Wine (tests/platform/CMakeLists.txt includes this file too):
#   trainer_platform    the platform layer: every operating-system call, src/platform/<os>/ (linux or windows)
#   trainer_torch_free  what is built on the platform layer alone: atomic files, write errors, the launcher
get_filename_component(TRAINER_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
if(WIN32)
  set(TRAINER_PLATFORM_OS windows)
else()
  set(TRAINER_PLATFORM_OS linux)
endif()
add_library(trainer_platform STATIC
  ${TRAINER_ROOT}/src/platform/${TRAINER_PLATFORM_OS}/child_process.cpp
  ${TRAINER_ROOT}/src/platform/${TRAINER_PLATFORM_OS}/files.cpp
  ${TRAINER_ROOT}/src/platform/${TRAINER_PLATFORM_OS}/process.cpp
  ${TRAINER_ROOT}/src/platform/${TRAINER_PLATFORM_OS}/stop_requests.cpp
  ${TRAINER_ROOT}/src/platform/read_loop.cpp)
target_include_directories(trainer_platform PUBLIC ${TRAINER_ROOT}/include)
target_compile_features(trainer_platform PUBLIC cxx_std_17)
if(WIN32)
  # Wide (UTF-16) Windows calls throughout; sockets for the launcher's free port, psapi for memory and modules,
  # shell32 for the command line.
  # WIN32_LEAN_AND_MEAN as PyTorch's own build has it: <windows.h> without the COM headers, whose `interface`
  # macro breaks LibTorch's c10d headers (ProcessGroupGloo.hpp), and NOMINMAX for std::min/std::max.
  target_compile_definitions(trainer_platform PUBLIC UNICODE _UNICODE WIN32_LEAN_AND_MEAN NOMINMAX)
  target_link_libraries(trainer_platform PUBLIC ws2_32 psapi shell32)
else()
  find_package(Threads REQUIRED)
  target_link_libraries(trainer_platform PUBLIC Threads::Threads ${CMAKE_DL_LIBS})
endif()

add_library(trainer_torch_free STATIC
  ${TRAINER_ROOT}/src/util/atomic_file.cpp
  ${TRAINER_ROOT}/src/util/write_error.cpp
  ${TRAINER_ROOT}/src/distributed/launcher.cpp)
target_link_libraries(trainer_torch_free PUBLIC trainer_platform)
