"""Tests of dualgpu.core and the foundation (rules, errors, nansafe): duals on every path."""
