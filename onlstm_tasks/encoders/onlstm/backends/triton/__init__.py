"""The ``triton`` back end: the kernels (:mod:`.kernels`, imported only where they run) and their launcher
(:mod:`.launcher`: how a pass is split, :func:`~.launcher.plan`, and launched)."""
