# Windows -> a trained classifier, as scripts/demo.sh on Debian: builds trainer (scripts\setup.ps1), downloads
# Fashion-MNIST (four .gz files, 30 MB) into data\fashion-mnist, trains the CNN for 3 epochs, evaluates best.pt.
#   powershell -ExecutionPolicy Bypass -File scripts\demo.ps1 [-Cuda] [extra trainer options]
param([switch]$Cuda, [Parameter(ValueFromRemainingArguments = $true)][string[]]$TrainerArgs)
$ErrorActionPreference = "Stop"
$root = Split-Path -Parent $PSScriptRoot
Set-Location $root
& "$PSScriptRoot\setup.ps1" -Cuda:$Cuda
$data = Join-Path $root "data\fashion-mnist"
New-Item -ItemType Directory -Force $data | Out-Null
foreach ($f in "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte") {
  if (-not (Test-Path "$data\$f.gz")) {
    Invoke-WebRequest -Uri "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/$f.gz" -OutFile "$data\$f.gz" -UseBasicParsing
  }
}
$trainer = "build\windows\Release\trainer.exe"
$run = "runs\fashion_mnist_demo-" + (Get-Date -Format "yyyyMMdd-HHmmss")
& $trainer --config configs\fashion_mnist_cnn.json --set "data.root=$data" --set train.epochs=3 --output-dir $run @TrainerArgs
if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }
& $trainer eval --checkpoint "$run\best.pt"
Write-Host "demo: run folder $run (train.log, metrics.csv, last.pt, best.pt)"
