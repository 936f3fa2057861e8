"""Tests of dualgpu.backends, one package per backend."""
