"""Training augmentation (mosaic, fused affine, mixup, copy-paste, HSV, flip) and the val letterbox.

Every geometric step works in *edge* pixel coordinates (pixel ``j`` covers
``[j, j + 1)``), the convention of COCO boxes, so an image resample and the
targets it carries use one and the same affine ``x' = s * x + t``.
"""
