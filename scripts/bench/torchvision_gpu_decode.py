#!/usr/bin/env python3
"""The reference for the trainer's GPU decode: torchvision.io.decode_jpeg on a CUDA device (nvJPEG through
PyTorch) over the training JPEGs of an ImageNet-layout folder, a batch of files per call, decode only (no crop or
resize). Prints one JSON line: images/s after one warm-up batch.
    torchvision_gpu_decode.py ROOT [--batch 256] [--batches 24]
"""
import argparse
import glob
import json
import os
import time

import torch
import torchvision
from torchvision.io import decode_jpeg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=24)
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.root, "train", "*", "*.JPEG")))
    datas = [torchvision.io.read_file(f) for f in files[: a.batch * (a.batches + 1)]]
    batches = [datas[i:i + a.batch] for i in range(0, len(datas), a.batch)]
    decode_jpeg(batches[0], device="cuda")  # warm-up: nvJPEG's handle and buffers
    torch.cuda.synchronize()
    start = time.perf_counter()
    images = 0
    for b in batches[1:]:
        decode_jpeg(b, device="cuda")
        images += len(b)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(json.dumps({"impl": "torchvision.io.decode_jpeg", "device": "cuda", "batch": a.batch, "images": images,
                      "images_per_s": images / seconds,
                      "cuda_peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20}))


if __name__ == "__main__":
    main()
