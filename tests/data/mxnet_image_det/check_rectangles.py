"""Checks ``trainer_cli.image_det._rectangle`` (draw_next's box drawing without OpenCV) against
``cv2.rectangle`` over 4000 random boxes (thickness -1 to 12, boxes partly outside the image,
corners in either order, float colours):

    /work/mxvenv/bin/python tests/data/mxnet_image_det/check_rectangles.py

prints ``mismatches: {}`` when every image is OpenCV's bit for bit (it was, with OpenCV 4.11).
The drawing functions are taken from the source file, so trainer_cli need not import here."""
import ast
import os

import cv2
import numpy

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                      "trainer_cli", "image_det.py")


def main():
    ns = {"numpy": numpy}
    for node in ast.parse(open(SOURCE).read()).body:
        if isinstance(node, ast.FunctionDef) and node.name in ("_spans", "_disc", "_rectangle"):
            exec(compile(ast.Module([node], []), SOURCE, "exec"), ns)
    rng = numpy.random.RandomState(0)
    bad = {}
    for _ in range(4000):
        h, w = rng.randint(5, 40, 2)
        t = int(rng.choice([-1, 0, 1, 2, 3, 4, 5, 6, 7, 9, 12]))
        x1, x2 = sorted(rng.randint(-5, w + 5, 2))
        y1, y2 = sorted(rng.randint(-5, h + 5, 2))
        if rng.rand() < 0.2:
            x1, x2 = x2, x1
        colour = rng.rand(3) * 255
        want = numpy.zeros((h, w, 3), numpy.uint8)
        got = want.copy()
        cv2.rectangle(want, (int(x1), int(y1)), (int(x2), int(y2)), colour, t)
        ns["_rectangle"](got, (int(x1), int(y1)), (int(x2), int(y2)), colour, t)
        if not numpy.array_equal(want, got):
            bad.setdefault(t, []).append((h, w, x1, y1, x2, y2))
    print("mismatches:", {k: (len(v), v[:2]) for k, v in bad.items()})


if __name__ == "__main__":
    main()
