# Windows -> every test run: scripts\setup.ps1 (tools, libraries, build), then ctest, as scripts/test.sh on Debian.
#   powershell -ExecutionPolicy Bypass -File scripts\test.ps1 [-Cuda] [ctest arguments, e.g. -R unit]
# The interop tests that compare with Python's torch and torchvision run when `python` has them (pip install torch
# torchvision), and are skipped with a message otherwise.
param([switch]$Cuda, [Parameter(ValueFromRemainingArguments = $true)][string[]]$CtestArgs)
$ErrorActionPreference = "Stop"
$root = Split-Path -Parent $PSScriptRoot
Set-Location $root
& "$PSScriptRoot\setup.ps1" -Cuda:$Cuda
$start = Get-Date
ctest --preset windows -j $env:NUMBER_OF_PROCESSORS @CtestArgs
$code = $LASTEXITCODE
Write-Host ("test.ps1: tests took {0:N0}s" -f ((Get-Date) - $start).TotalSeconds)
exit $code
