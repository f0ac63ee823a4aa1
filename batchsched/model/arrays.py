"""The numpy arrays a session works on: one value per node, node row or resource column."""

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


def request_row(request: Mapping[str, int], column: Mapping[str, int]) -> IntArray:
    """A pod's requests (resource name -> amount) as a row over the resource columns."""
    row = np.zeros(len(column), dtype=np.int64)
    for name, value in request.items():
        row[column[name]] = value
    return row
