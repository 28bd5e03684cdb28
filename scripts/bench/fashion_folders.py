#!/usr/bin/env python3
"""Writes Fashion-MNIST images as class folders of PNGs, the layout a user's own photos come in, for the
fine-tuning measurement (scripts/bench/finetune.sh).

    fashion_folders.py IDX_DIR OUT --classes 5,6,7,8,9 --per-class 50 [--split train|t10k] [--skip 0]

OUT/c<label>/<index>.png for the first --per-class images of each class in the split (after skipping --skip of
them), grey 28x28 as the dataset has them.
"""
import argparse
import gzip
import os

import numpy as np
from PIL import Image


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("idx_dir")
    parser.add_argument("out")
    parser.add_argument("--classes", required=True)
    parser.add_argument("--per-class", type=int, required=True)
    parser.add_argument("--split", default="train")
    parser.add_argument("--skip", type=int, default=0)
    args = parser.parse_args()
    images = read_idx(os.path.join(args.idx_dir, args.split + "-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.idx_dir, args.split + "-labels-idx1-ubyte.gz"))
    for c in (int(x) for x in args.classes.split(",")):
        folder = os.path.join(args.out, "c%d" % c)
        os.makedirs(folder, exist_ok=True)
        indices = np.flatnonzero(labels == c)[args.skip:args.skip + args.per_class]
        for i in indices:
            Image.fromarray(images[i]).save(os.path.join(folder, "%05d.png" % i))


if __name__ == "__main__":
    main()
