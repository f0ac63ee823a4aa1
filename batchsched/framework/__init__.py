"""The session machinery: callbacks, statements, configuration."""
