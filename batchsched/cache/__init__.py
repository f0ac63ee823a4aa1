"""The cluster as last observed, and consistent per-session snapshots of it."""
