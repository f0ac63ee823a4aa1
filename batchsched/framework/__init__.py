"""The session machinery: the Session and its plugin contract, statements, GPU cards,
reservations and victims."""
