"""The error a tool raises for the calling model to act on."""


class ToolError(Exception):
    """A failure the calling model can act on, returned as the WIT `tool-error`.

    ``code`` is a stable snake_case word (``not_found``, ``upstream_failed``);
    ``message`` says what went wrong and what to do next, written for the
    model; ``retryable`` says whether the same call may succeed later.
    Raise it from a tool; the SDK hands it to the host unchanged.
    """

    def __init__(self, code: str, message: str, retryable: bool = False) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
