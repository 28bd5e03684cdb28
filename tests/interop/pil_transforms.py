#!/usr/bin/env python3
"""The Python side of the transform parity test: torchvision's PIL transforms on the cases the trainer renders.

  pil_transforms.py IMAGE CASES OUT_DIR

IMAGE is a PNG or a JPEG (decoded by PIL at full size, as torchvision's ImageFolder loader does). CASES is a JSON list; each case is
  {"kind": "train", "left": L, "top": T, "width": W, "height": H, "size": S, "flip": bool, "filter": F}
      F.resized_crop(img, T, L, H, W, [S, S], F) then F.hflip when flip (what RandomResizedCrop and
      RandomHorizontalFlip do once their random draws are made)
  {"kind": "eval", "resize": R, "size": S, "filter": F}
      F.center_crop(F.resize(img, R), S)
with F "bilinear" or "bicubic". Writes OUT_DIR/case_<i>.raw: the result's bytes, row-major, RGB or L.
Exit status 0, or 2 for bad arguments.
"""
import json
import sys

from PIL import Image
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode

FILTERS = {"bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC}


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    image = Image.open(sys.argv[1])
    image.load()
    with open(sys.argv[2]) as f:
        cases = json.load(f)
    for i, case in enumerate(cases):
        mode = FILTERS[case["filter"]]
        if case["kind"] == "train":
            out = F.resized_crop(image, case["top"], case["left"], case["height"], case["width"],
                                 [case["size"], case["size"]], mode)
            if case["flip"]:
                out = F.hflip(out)
        else:
            out = F.center_crop(F.resize(image, case["resize"], mode), case["size"])
        with open(f"{sys.argv[3]}/case_{i}.raw", "wb") as f:
            f.write(out.tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
