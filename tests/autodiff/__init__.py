"""Tests of dualgpu.autodiff: drivers, sparsity, second order, uncertainty, executors."""
