"""Execution backends: the real GPU (``cuda``), compiled CPU (``cpu``) and the CUDA simulator
(``cudasim``)."""
