"""Tests of dualgpu.sensitivity and of the figures (dualgpu.plot)."""
