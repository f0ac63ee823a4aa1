"""The operator shell: the only code that talks to the Kubernetes API (`batchsched run`)."""
