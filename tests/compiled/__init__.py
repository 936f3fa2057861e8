"""Tests of dualgpu.compiled: duals inside numba-compiled code, and their PTX."""
