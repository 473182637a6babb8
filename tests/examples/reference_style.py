"""A script as a user of the reference trainer writes it; only the import line is this project's.

Usage: python reference_style.py WEIGHTS IMAGE_FOLDER
"""

import sys
from pathlib import Path

import numpy as np
from PIL import Image

from lucidyolo import Model as YOLO

weights, folder = sys.argv[1], Path(sys.argv[2])
model = YOLO(weights)
print("classes:", model.names)

# a frame as cv2.imread hands it: BGR, channels last
image_path = sorted(folder.glob("*.jpg"))[0]
frame = np.asarray(Image.open(image_path).convert("RGB"))[:, :, ::-1].copy()

results = model(frame, conf=0.001)
for r in results:
    print("image", r.orig_shape, "boxes", tuple(r.boxes.xyxy.shape), tuple(r.boxes.xywh.shape))
    for box in r.boxes:
        x1, y1, x2, y2 = box.xyxy[0].tolist()
        cls_id = int(box.cls[0])
        print(f"det {r.names[cls_id]} {float(box.conf[0]):.3f} {x1:.1f} {y1:.1f} {x2:.1f} {y2:.1f}")
    confident = r.boxes.conf > 0.0
    print("kept", int(confident.sum()), "of", len(r.boxes), [model.names[int(c)] for c in r.boxes.cls[:3]])
    r.save(filename="result.jpg")

for r in model.predict(str(folder), stream=True, conf=0.001):
    print("streamed", Path(r.path).name, len(r.boxes))

metrics = model.val()
print(f"mAP50-95 {metrics.box.map:.4f}")
print(f"mAP50 {metrics.box.map50:.4f}")
print(f"mAP75 {metrics.box.map75:.4f}")
print("per class", len(metrics.box.maps))
