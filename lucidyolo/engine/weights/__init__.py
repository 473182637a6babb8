"""Weights in and out: checkpoints (the weights-only loader, the atomic writer), restoring a run or a
weights file into a model, the class-aware transfer of a source's weights, where ``--model.weights``
comes from, the publisher's checkpoints (read without running them; ``pickle_scan.py`` reads a pickle's
opcodes without executing it), the slim weights file, and ``lucid export``'s runner (weights out as a
deployed graph)."""
