"""The built-in keypoint task (``keypoints``): its spec (:mod:`.spec`, torch-free), hooks (:mod:`.hooks`),
keypoint loss (with its RealNVP density), OKS, epoch metric, COCO result writer and synthetic scene
(:mod:`.synthetic`). Importing the package imports nothing else."""
