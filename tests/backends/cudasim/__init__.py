"""Tests of the CUDA-simulator backend (dualgpu.backends.cudasim)."""
