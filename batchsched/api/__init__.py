"""Plain data: the scheduler's view of pods, nodes, groups and queues, with no I/O."""
