"""Tests of dualgpu.plot: heatmaps, fields, rankings, histories and their colour scales."""
