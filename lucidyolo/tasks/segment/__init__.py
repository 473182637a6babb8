"""The built-in instance segmentation task (``seg``): its spec (:mod:`.spec`, torch-free), hooks
(:mod:`.hooks`), prototype head, mask loss, epoch metric, gate metric and synthetic scene
(:mod:`.synthetic`). Importing the package imports nothing else."""
