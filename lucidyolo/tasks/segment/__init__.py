"""The built-in instance segmentation task (``seg``): its spec (:mod:`.spec`, torch-free), hooks
(:mod:`.hooks`), prototype head, mask loss, epoch metric and gate metric. Importing the package
imports nothing else."""
