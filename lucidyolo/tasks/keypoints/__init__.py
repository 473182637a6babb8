"""The built-in keypoint task (``keypoints``): its spec (:mod:`.spec`, torch-free), hooks (:mod:`.hooks`),
keypoint loss (with its RealNVP density), OKS, epoch metric and COCO result writer. Importing the
package imports nothing else."""
