"""`batchsched explain`: why a pod, PodGroup or queue waits, and what would let it run.

It reads the cluster as the operator does (or simulator YAML), runs the scheduling core
once without binding anything, and asks the session why: reading.py builds the cache,
analysis.py runs the session and names the cause and a remedy, remedies.py works out
what would make a gang fit, scores.py why a bound pod went where it did, render.py
prints it, command.py is the subcommand.
"""
