"""A CUB-200-2011 root in the official layout, for tests and benchmarks.

images.txt, image_class_labels.txt, bounding_boxes.txt, classes.txt and
images/<class folder>/<file>.ppm: colour images of varying sizes whose class
colours a square inside the annotated box; the rest is noise.
"""


def ppm(label, rows, cols, box, seed):
    """A colour image: the class colours a square (the box); the rest is noise."""
    x0, y0, side = box
    state = seed * 2654435761 + 1
    pixels = bytearray()
    for y in range(rows):
        for x in range(cols):
            inside = x0 <= x < x0 + side and y0 <= y < y0 + side
            for c in range(3):
                state = (state * 1103515245 + 12345) % 2**32
                noise = (state >> 16) % 64
                pixels.append(((label * (c + 3) * 53) % 192 + noise) if inside else noise)
    return b"P6\n%d %d\n255\n" % (cols, rows) + bytes(pixels)


def write_cub(root, classes=(1, 2, 3, 4), per_class=6):
    images, labels, boxes, names = [], [], [], []
    image_id = 0
    for label in classes:
        folder = "%03d.Bird_%d" % (label, label)
        names.append("%d %s" % (label, folder))
        (root / "images" / folder).mkdir(parents=True, exist_ok=True)
        for _ in range(per_class):
            image_id += 1
            rows, cols = 30 + (image_id * 7) % 17, 34 + (image_id * 5) % 19
            box = (3 + image_id % 5, 2 + image_id % 4, 18)
            relative = "%s/Bird_%d.ppm" % (folder, image_id)
            (root / "images" / relative).write_bytes(ppm(label, rows, cols, box, image_id))
            images.append("%d %s" % (image_id, relative))
            labels.append("%d %d" % (image_id, label))
            boxes.append("%d %d.0 %d.0 %d.0 %d.0" % (image_id, box[0], box[1], box[2], box[2]))
    for name, lines in (("images.txt", images), ("image_class_labels.txt", labels),
                        ("bounding_boxes.txt", boxes), ("classes.txt", names)):
        (root / name).write_text("\n".join(lines) + "\n")
