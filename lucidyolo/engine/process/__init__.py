"""Process concerns, the same for every command: CPU threads per process, a clean end on Ctrl-C, disk
faults as one message, the RNG state a resume restores, the global-batch BatchNorm plugin for several
processes, the watcher that ends a run when a DDP rank dies, and the known harmless warnings silenced.
Nothing here knows a task or the run folder's reports."""
