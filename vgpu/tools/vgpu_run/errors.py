"""The one error type that stops vgpu-run before the command starts (exit status 2)."""


class UsageError(Exception):
    """A setup vgpu-run refuses: the message is one line that says what to change."""
