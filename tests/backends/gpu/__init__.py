"""Tests of the GPU backend (dualgpu.backends.gpu), checked offline through PTX and SASS."""
