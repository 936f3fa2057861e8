"""Type aliases used in the hints of the public API (dualgpu ships a ``py.typed`` marker).

The hints describe what a user passes and gets back; they are checked with mypy on the public
modules (``nox -s typecheck``). Arrays are whatever numpy accepts (:data:`numpy.typing.ArrayLike`,
which includes :class:`dualgpu.DualArray` through ``__array__``-free duck typing at run time).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # scipy.sparse is imported by the sparse driver only when it is used
    import scipy.sparse

__all__ = ["ArgNums", "ArrayLike", "Executor", "Function", "JacobianResult", "Progress",
           "SparseMatrix", "Sparsity"]

#: A user's simulation or objective: arrays and scalars in, an array, a scalar or a tuple out.
Function = Callable[..., Any]
#: Which positional arguments to differentiate: one index or several.
ArgNums = Union[int, Sequence[int]]
#: Anything numpy turns into an array (and DualArrays, Duals, device arrays).
ArrayLike = Union[npt.ArrayLike, Any]
#: ``True``/``False`` shows or hides progress bars; ``None`` shows them on a terminal only.
Progress = Union[bool, None]
#: An executor with ``submit`` (``concurrent.futures``, :class:`dualgpu.distributed.ChunkExecutor`,
#: a Dask client) that runs chunks of lanes in parallel; ``None`` runs them here.
Executor = Any
#: A sparse Jacobian as scipy returns it.
SparseMatrix = Union["scipy.sparse.csr_array", "scipy.sparse.csr_matrix"]
#: ``"detect"``, ``"detect-global"``, a pattern (boolean array or scipy sparse) or a coloring.
Sparsity = Union[Literal["detect", "detect-global"], npt.ArrayLike, Any, None]
#: A Jacobian: dense (one array, or one per differentiated argument) or sparse.
JacobianResult = Union[np.ndarray, SparseMatrix, Tuple[Any, ...]]
