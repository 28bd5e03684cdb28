#!/usr/bin/env python3
"""The Python side of the augmentation parity test: torchvision's own ops on the cases the trainer applies.

  pil_augment.py IMAGE CASES OUT_DIR

IMAGE is a lossless image (PNG, RGB or L). CASES is a JSON list; each case is one of
  {"op": NAME, "magnitude": M, "interpolation": "nearest"|"bilinear"|"bicubic", "fill": [..]}
      torchvision.transforms.autoaugment._apply_op(img, NAME, M, interpolation, fill)
  {"op": "hue", "magnitude": F}     F.adjust_hue(img, F)      (likewise "brightness", "contrast", "saturation")
  {"space": KIND, "bins": N, "height": H, "width": W}
      the policy's _augmentation_space: writes {"torch": version, "space": {op: [magnitudes...]}} as JSON
Writes OUT_DIR/case_<i>.raw (the result's bytes, row-major) or OUT_DIR/case_<i>.json. Exit status 0, or 2.
"""
import json
import sys

from PIL import Image
import torch
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode, autoaugment as A

MODES = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR,
         "bicubic": InterpolationMode.BICUBIC}
ADJUST = {"hue": F.adjust_hue, "brightness": F.adjust_brightness, "contrast": F.adjust_contrast,
          "saturation": F.adjust_saturation}


def space(case):
    kind, bins, size = case["space"], case["bins"], (case["height"], case["width"])
    if kind == "autoaugment":
        table = A.AutoAugment()._augmentation_space(bins, size)
    elif kind == "randaugment":
        table = A.RandAugment(num_magnitude_bins=bins)._augmentation_space(bins, size)
    elif kind == "trivialaugment_wide":
        table = A.TrivialAugmentWide(num_magnitude_bins=bins)._augmentation_space(bins)
    else:
        table = A.AugMix()._augmentation_space(bins, size)
    return {name: (m.tolist() if m.ndim > 0 else []) for name, (m, _) in table.items()}


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    image = Image.open(sys.argv[1])
    image.load()
    with open(sys.argv[2]) as f:
        cases = json.load(f)
    for i, case in enumerate(cases):
        if "space" in case:
            with open(f"{sys.argv[3]}/case_{i}.json", "w") as f:
                json.dump({"torch": torch.__version__, "space": space(case)}, f)
            continue
        if case["op"] in ADJUST:
            out = ADJUST[case["op"]](image, case["magnitude"])
        else:
            out = A._apply_op(image, case["op"], case["magnitude"], MODES[case.get("interpolation", "nearest")],
                              case.get("fill"))
        with open(f"{sys.argv[3]}/case_{i}.raw", "wb") as f:
            f.write(out.tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
