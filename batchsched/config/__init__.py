"""The scheduler's configuration: the YAML users write, checked in full (load.py), and
the peers' files translated into it (peers.py: Volcano in volcano.py, kube-scheduler
and scheduler-plugins in kube.py)."""
