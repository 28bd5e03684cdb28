#!/usr/bin/env python3
"""The Python reference for `trainer bench`: the same training step (forward, cross-entropy, backward, SGD with
momentum 0.9, lr 0.01, gradients set to None) on torchvision's ResNets, random data, same LibTorch (Debian's
python3-torch). Prints one JSON line with the same fields as `trainer bench --json`.
  /usr/bin/python3 scripts/bench/resnet_step.py --arch resnet50 --batch 16 --size 224 --threads 2
"""
import argparse
import json
import resource
import statistics
import time

import torch
import torchvision


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
    model = getattr(torchvision.models, a.arch)(num_classes=a.classes).to(memory_format=memory_format)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, a.size, a.size).contiguous(memory_format=memory_format)
    y = torch.randint(0, a.classes, (a.batch,))
    step_ms = []
    for i in range(a.warmup + a.steps):
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss.item()
        ms = (time.perf_counter() - start) * 1000
        if i >= a.warmup:
            step_ms.append(ms)
    median = statistics.median(step_ms)
    print(json.dumps({"impl": "python", "arch": a.arch, "batch": a.batch, "size": a.size,
                      "channels_last": a.channels_last, "threads": torch.get_num_threads(), "device": "cpu",
                      "step_ms_median": median, "step_ms": step_ms, "images_per_s": 1000 * a.batch / median,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
