#!/usr/bin/env python3
"""Builds an ImageNet-layout folder of real photographs at ImageNet sizes for the data-pipeline benchmark.

Each class is one of scikit-image's sample photographs (Debian's python3-skimage ships them); its images are
random crops of 40-100% of the photo, resized so the longer side is 500 px (ImageNet's typical 500x375 and
500x333) or, for one in eight, 800-1200 px (ImageNet has large images too), saved as JPEG quality 90.
    make_photo_folder.py PHOTO_DIR OUT [--per-class 50] [--seed 0]
"""
import argparse
import os
import random

from PIL import Image

PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
          "motorcycle_right.png", "retina.jpg", "hubble_deep_field.jpg", "ihc.png", "camera.png"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photo_dir")
    ap.add_argument("out")
    ap.add_argument("--per-class", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    val = os.path.join(args.out, "val")
    os.makedirs(val, exist_ok=True)
    labels = []
    for c, name in enumerate(PHOTOS):
        photo = Image.open(os.path.join(args.photo_dir, name)).convert("RGB")
        w, h = photo.size
        wnid = "n%08d" % (c + 1)
        folder = os.path.join(args.out, "train", wnid)
        os.makedirs(folder, exist_ok=True)
        for i in range(args.per_class + 2):
            frac = rng.uniform(0.4, 1.0)
            aspect = rng.choice([4 / 3, 3 / 2, 3 / 4, 2 / 3, 1.0])
            cw = min(w, int((frac * w * h * aspect) ** 0.5))
            ch = min(h, int(cw / aspect))
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            longer = rng.randint(800, 1200) if rng.random() < 0.125 else 500
            s = longer / max(cw, ch)
            img = photo.crop((x, y, x + cw, y + ch)).resize((max(1, round(cw * s)), max(1, round(ch * s))),
                                                            Image.BILINEAR)
            if i < args.per_class:
                img.save(os.path.join(folder, "%s_%d.JPEG" % (wnid, i)), quality=90)
            else:
                file = "ILSVRC2012_val_%08d.JPEG" % (len(labels) + 1)
                img.save(os.path.join(val, file), quality=90)
                labels.append("%s %d" % (file, c))
    with open(os.path.join(args.out, "val_label.txt"), "w") as f:
        f.write("\n".join(labels) + "\n")
    print("wrote %d classes x %d train images to %s" % (len(PHOTOS), args.per_class, args.out))


if __name__ == "__main__":
    main()
