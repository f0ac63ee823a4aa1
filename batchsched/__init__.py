"""batchsched: gang scheduling and tight packing of nodes and GPUs for Kubernetes."""

__version__ = "0.1.0"
