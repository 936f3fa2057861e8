"""Tests of dualgpu.interop (JAX)."""
