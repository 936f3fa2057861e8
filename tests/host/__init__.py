"""Tests of dualgpu.host: numpy on host duals."""
