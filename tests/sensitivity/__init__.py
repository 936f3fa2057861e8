"""Tests of dualgpu.sensitivity: global sensitivity from exact derivatives (DGSM), beside SALib."""
