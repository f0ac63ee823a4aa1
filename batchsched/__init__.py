"""batchsched: gang scheduling and tight packing of nodes and GPUs for Kubernetes."""

import os

__version__ = "0.1.0"

# Set before numpy is first imported, which every command does. numpy's OpenBLAS starts
# a thread for each core at import, and the scheduler never gives them work: its array
# operations are element-wise. On a 2-core machine that spare thread used ~0.1 s of CPU
# while the operator bound 5,000 pods, CPU the API server beside it could have used.
# A value the user sets wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
