"""Tests of dualgpu.porting: numba.cuda code ported with one import line."""
