"""The built-in detection task (``det``): its spec (:mod:`.spec`, torch-free), hooks (:mod:`.hooks`) and
the overfit gate's recall (:mod:`.recall`). Importing the package imports nothing else."""
