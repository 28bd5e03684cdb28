#!/usr/bin/env python3
"""The Python reference for `trainer bench`: the same training step (forward, cross-entropy, backward, SGD with
momentum 0.9, lr 0.01, gradients set to None) on torchvision's ResNets, random data, same LibTorch (Debian's
python3-torch). On CUDA as torchvision's reference recipe trains: cudnn.benchmark, autocast, and for float16 a
GradScaler. Prints one JSON line with the same fields as `trainer bench --json`.
  /usr/bin/python3 scripts/bench/resnet_step.py --arch resnet50 --batch 16 --size 224 --threads 2
  python3 scripts/bench/resnet_step.py --device cuda --batch 256 --channels-last --amp float16 --warmup 10 --steps 40
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
    p.add_argument("--device", default="cpu")
    p.add_argument("--amp", choices=["off", "float16", "bfloat16"], default="off")
    p.add_argument("--profile-steps", type=int, default=0,
                   help="after timing, profile this many steps: the operators taking the most time, per step")
    a = p.parse_args()
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
    model = getattr(torchvision.models, a.arch)(num_classes=a.classes).to(device, memory_format=memory_format)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(a.batch, 3, a.size, a.size, device=device).contiguous(memory_format=memory_format)
    y = torch.randint(0, a.classes, (a.batch,), device=device)
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(a.amp)
    scaler = None
    if a.amp == "float16":  # torch.amp's in 2.x; torch.cuda.amp's (deprecated since) in 1.13
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()

    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        loss.item()

    step_ms = []
    for i in range(a.warmup + a.steps):
        start = time.perf_counter()
        step()
        ms = (time.perf_counter() - start) * 1000
        if i >= a.warmup:
            step_ms.append(ms)
    top_ops = profile(step, a.profile_steps, cuda) if a.profile_steps > 0 else []
    median = statistics.median(step_ms)
    print(json.dumps({"impl": "python", "arch": a.arch, "batch": a.batch, "size": a.size,
                      "channels_last": a.channels_last, "threads": torch.get_num_threads(), "device": a.device, "amp": a.amp,
                      "step_ms_median": median, "step_ms": step_ms, "images_per_s": 1000 * a.batch / median,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "cuda_peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20 if cuda else 0,
                      "top_ops_ms_per_step": top_ops}))


def profile(step, steps, cuda):
    """The 12 operators with the most self time (device time on CUDA), in ms per step: where a dtype's time goes."""
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            step()
    def self_time(e):  # microseconds; the attribute's name changed in 2.x
        if cuda:
            return getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
        return e.self_cpu_time_total
    ops = sorted(prof.key_averages(), key=self_time, reverse=True)[:12]
    return [[e.key, round(self_time(e) / 1000 / steps, 3)] for e in ops]


if __name__ == "__main__":
    main()
