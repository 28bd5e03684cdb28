"""The Python side of compare_deploy.sh: batch latency of a model in PyTorch, as a deployer in Python runs it.
  torchvision: torchvision.models.ARCH with the TorchScript file's state_dict (eager mode);
  jit:         torch.jit.load of the TorchScript file.
Prints one JSON line: {"torchvision": median ms, "jit": median ms}.
  deploy_latency.py FILE.ts.pt ARCH CLASSES C H W [--batch 1 --warmup 5 --runs 20 --threads N]
"""
import argparse
import json
import statistics
import time

import torch
import torchvision

p = argparse.ArgumentParser()
p.add_argument("torchscript")
p.add_argument("arch")
p.add_argument("classes", type=int)
p.add_argument("shape", type=int, nargs=3)
p.add_argument("--batch", type=int, default=1)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--runs", type=int, default=20)
p.add_argument("--threads", type=int, default=0)
a = p.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
scripted = torch.jit.load(a.torchscript).eval()
eager = getattr(torchvision.models, a.arch)(num_classes=a.classes)
eager.load_state_dict(scripted.state_dict())
eager.eval()
x = torch.randn(a.batch, *a.shape)


def latency(model):
    ms = []
    with torch.no_grad():
        for i in range(a.warmup + a.runs):
            start = time.perf_counter()
            model(x)
            if i >= a.warmup:
                ms.append((time.perf_counter() - start) * 1e3)
    return statistics.median(ms)


print(json.dumps({"torchvision": latency(eager), "jit": latency(scripted)}))
