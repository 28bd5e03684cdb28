#!/usr/bin/env python3
"""Builds an ImageNet-layout folder of real photographs at ImageNet sizes for the data-pipeline benchmark.

Each class is one of scikit-image's sample photographs (Debian's python3-skimage ships them); its images are
random crops of 40-100% of the photo, resized so the longer side is 500 px (ImageNet's typical 500x375 and
500x333) or, for one in eight, 800-1200 px (ImageNet has large images too), saved as JPEG quality 90. With
--longer 4032 every image is phone-sized instead (4032x3024 is 12 megapixels). Each image is a function of
(seed, class, index) alone, so the folder is the same whatever --jobs processes write it.
    make_photo_folder.py PHOTO_DIR OUT [--per-class 50] [--val-per-class 2] [--seed 0] [--jobs N] [--longer PX]
"""
import argparse
import multiprocessing
import os
import random

from PIL import Image

PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
          "motorcycle_right.png", "retina.jpg", "hubble_deep_field.jpg", "ihc.png", "camera.png"]


def write_images(job):
    """Writes the images [first, end) of class c: indices below per_class go to train/, the rest to val/."""
    photo_dir, out, seed, c, first, end, per_class, val_per_class, fixed_longer = job
    photo = Image.open(os.path.join(photo_dir, PHOTOS[c])).convert("RGB")
    w, h = photo.size
    wnid = "n%08d" % (c + 1)
    for i in range(first, end):
        rng = random.Random("%d/%d/%d" % (seed, c, i))
        frac = rng.uniform(0.4, 1.0)
        aspect = rng.choice([4 / 3, 3 / 2, 3 / 4, 2 / 3, 1.0])
        cw = min(w, int((frac * w * h * aspect) ** 0.5))
        ch = min(h, int(cw / aspect))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        longer = rng.randint(800, 1200) if rng.random() < 0.125 else 500
        if fixed_longer:
            longer = fixed_longer
        s = longer / max(cw, ch)
        img = photo.crop((x, y, x + cw, y + ch)).resize((max(1, round(cw * s)), max(1, round(ch * s))),
                                                        Image.BILINEAR)
        if i < per_class:
            img.save(os.path.join(out, "train", wnid, "%s_%d.JPEG" % (wnid, i)), quality=90)
        else:
            img.save(os.path.join(out, "val", val_name(c, i - per_class, val_per_class)), quality=90)


def val_name(c, j, val_per_class):
    return "ILSVRC2012_val_%08d.JPEG" % (c * val_per_class + j + 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photo_dir")
    ap.add_argument("out")
    ap.add_argument("--per-class", type=int, default=50)
    ap.add_argument("--val-per-class", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1, help="processes writing images (the folder is the same)")
    ap.add_argument("--longer", type=int, default=0, help="every image's longer side in pixels (0: ImageNet's sizes)")
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "val"), exist_ok=True)
    for c in range(len(PHOTOS)):
        os.makedirs(os.path.join(args.out, "train", "n%08d" % (c + 1)), exist_ok=True)
    per_image = args.per_class + args.val_per_class
    chunk = 50
    jobs = [(args.photo_dir, args.out, args.seed, c, first, min(per_image, first + chunk), args.per_class,
             args.val_per_class, args.longer) for c in range(len(PHOTOS)) for first in range(0, per_image, chunk)]
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            pool.map(write_images, jobs)
    else:
        for job in jobs:
            write_images(job)
    labels = ["%s %d" % (val_name(c, j, args.val_per_class), c)
              for c in range(len(PHOTOS)) for j in range(args.val_per_class)]
    with open(os.path.join(args.out, "val_label.txt"), "w") as f:
        f.write("\n".join(labels) + "\n")
    print("wrote %d classes x %d train and %d val images to %s" % (len(PHOTOS), args.per_class, args.val_per_class,
                                                                   args.out))


if __name__ == "__main__":
    main()
