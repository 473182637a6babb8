"""The built-in oriented-box task (``obb``): its spec (:mod:`.spec`, torch-free), hooks (:mod:`.hooks`),
rotated box loss, rotated NMS, rotated mAP (with its epoch metric and the DOTA scene merge) and
synthetic scene (:mod:`.synthetic`). Importing the package imports nothing else."""
