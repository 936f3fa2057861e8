"""Tests of the compiled CPU backend (dualgpu.backends.cpu), block-level kernels included."""
