"""Where dualgpu's own source lies: the frames that error messages skip to find the user's line."""
import os

__all__ = ["PACKAGE_DIR"]

#: ``.../dualgpu/`` with a trailing separator: a frame whose file starts with it is dualgpu's
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
