#!/usr/bin/env python3
"""torchvision's ImageNet training input pipeline, timed as `trainer bench data` times ours: ImageFolder (PIL),
RandomResizedCrop, RandomHorizontalFlip, [an automatic augmentation policy], ToTensor, Normalize,
[RandomErasing], DataLoader with worker processes (the order of torchvision's reference ClassificationPresetTrain).
Prints one JSON line: images/s after the warmup batches, and peak RSS of the main process and of the largest worker.
    data_pipeline.py ROOT [--size 224] [--batch 64] [--workers 2] [--warmup 2] [--batches 20]
                          [--auto-augment none|imagenet|randaugment|trivialaugment_wide|augmix] [--random-erase P]
"""
import argparse
import json
import resource
import time

import torch
import torchvision.datasets as datasets
import torchvision.transforms as T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--auto-augment", default="none")
    ap.add_argument("--random-erase", type=float, default=0.0)
    args = ap.parse_args()
    torch.set_num_threads(2)
    steps = [T.RandomResizedCrop(args.size), T.RandomHorizontalFlip()]
    policies = {"imagenet": lambda: T.AutoAugment(T.AutoAugmentPolicy.IMAGENET), "randaugment": T.RandAugment,
                "trivialaugment_wide": T.TrivialAugmentWide, "augmix": T.AugMix}
    if args.auto_augment != "none":
        steps.append(policies[args.auto_augment]())
    steps += [T.ToTensor(), T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])]
    if args.random_erase > 0:
        steps.append(T.RandomErasing(p=args.random_erase))
    transform = T.Compose(steps)
    dataset = datasets.ImageFolder(args.root + "/train", transform)
    total, seen, images = args.warmup + args.batches, 0, 0
    start = time.perf_counter()
    while seen < total:  # epochs follow each other, each a new pass of the DataLoader
        loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True,
                                             num_workers=args.workers)
        for x, _ in loader:
            x = x.contiguous(memory_format=torch.channels_last)
            seen += 1
            if seen == args.warmup:
                start = time.perf_counter()
            if seen > args.warmup:
                images += x.size(0)
            if seen == total:
                break
    elapsed = time.perf_counter() - start
    print(json.dumps({"impl": "torchvision", "mode": "pipeline", "workers": args.workers, "batch": args.batch,
                      "images": images, "images_per_s": images / elapsed,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "worker_peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
