"""The exception types for bad user input, so every shell can report it the same way."""


class InvalidObject(ValueError):
    """An object or setting that cannot be used as written.

    The message always names the object (kind, namespace/name) or the key, so a user can
    find and fix it without reading the scheduler's code.
    """


class UnreadableInput(Exception):
    """A file that cannot be read at all (the simulator's input, a configuration): the
    command stops with a non-zero exit."""
