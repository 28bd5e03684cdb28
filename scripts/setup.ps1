# Windows 10/11 (x64) -> a built trainer: what scripts/setup.sh and scripts/build.sh do on Debian.
#   powershell -ExecutionPolicy Bypass -File scripts\setup.ps1 [-Cuda] [-LibTorchVersion 2.6.0]
# Installs (once) Visual Studio 2022 Build Tools with the C++ workload (winget), vcpkg with the libraries in
# vcpkg.json, and LibTorch from the official zip (CPU, or CUDA 12.4 with -Cuda) under third_party\; then configures
# and builds the `windows` CMake preset into build\windows (Release). Run it again to rebuild; it skips what is there.
param(
  [switch]$Cuda,
  [string]$LibTorchVersion = "2.6.0"
)
$ErrorActionPreference = "Stop"
$root = Split-Path -Parent $PSScriptRoot
Set-Location $root
function Say($text) { Write-Host "setup: $text" }

# 1. The MSVC toolset, found through vswhere (installed with every Visual Studio 2017+).
$vswhere = "${env:ProgramFiles(x86)}\Microsoft Visual Studio\Installer\vswhere.exe"
$vs = if (Test-Path $vswhere) { & $vswhere -latest -products * -requires Microsoft.VisualStudio.Component.VC.Tools.x86.x64 -property installationPath } else { $null }
if (-not $vs) {
  Say "installing Visual Studio 2022 Build Tools with the C++ workload (winget; a few GB)"
  winget install --id Microsoft.VisualStudio.2022.BuildTools --accept-package-agreements --accept-source-agreements `
    --override "--quiet --wait --add Microsoft.VisualStudio.Workload.VCTools --includeRecommended"
  $vs = & $vswhere -latest -products * -requires Microsoft.VisualStudio.Component.VC.Tools.x86.x64 -property installationPath
  if (-not $vs) { throw "setup: Visual Studio's C++ tools are still missing; install them and run setup.ps1 again" }
}
# The compiler's environment (cl, link, cmake and ninja from Visual Studio) in this PowerShell session.
Import-Module "$vs\Common7\Tools\Microsoft.VisualStudio.DevShell.dll"
Enter-VsDevShell -VsInstallPath $vs -SkipAutomaticLocation -DevCmdArguments "-arch=x64 -host_arch=x64" | Out-Null

# 2. vcpkg (its manifest mode installs vcpkg.json's libraries during the CMake configure).
if (-not $env:VCPKG_ROOT) { $env:VCPKG_ROOT = Join-Path $root "third_party\vcpkg" }
if (-not (Test-Path "$env:VCPKG_ROOT\vcpkg.exe")) {
  Say "installing vcpkg into $env:VCPKG_ROOT"
  git clone --depth 1 https://github.com/microsoft/vcpkg.git $env:VCPKG_ROOT
  & "$env:VCPKG_ROOT\bootstrap-vcpkg.bat" -disableMetrics
}

# 3. LibTorch, the official Windows build (Debian's is Linux only).
$flavour = if ($Cuda) { "cu124" } else { "cpu" }
$libtorch = Join-Path $root "third_party\libtorch-$LibTorchVersion-$flavour"
if (-not (Test-Path "$libtorch\share\cmake\Torch\TorchConfig.cmake")) {
  $url = "https://download.pytorch.org/libtorch/$flavour/libtorch-win-shared-with-deps-$LibTorchVersion%2B$flavour.zip"
  $zip = "$libtorch.zip"
  Say "downloading $url"
  Invoke-WebRequest -Uri $url -OutFile $zip -UseBasicParsing
  Expand-Archive -Path $zip -DestinationPath "$libtorch.tmp" -Force
  Move-Item "$libtorch.tmp\libtorch" $libtorch
  Remove-Item -Recurse -Force "$libtorch.tmp", $zip
}
$env:LIBTORCH_DIR = $libtorch

# 4. Configure and build (Release).
cmake --preset windows
if ($LASTEXITCODE -ne 0) { throw "setup: cmake --preset windows failed" }
cmake --build --preset windows
if ($LASTEXITCODE -ne 0) { throw "setup: the build failed" }
# LibTorch's DLLs beside trainer.exe, so it starts from any folder.
Copy-Item "$libtorch\lib\*.dll" "build\windows\Release\" -Force
Say "built build\windows\Release\trainer.exe against LibTorch $LibTorchVersion ($flavour)"
