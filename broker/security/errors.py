"""The error every security module raises for a setting that cannot be used (imports nothing of Samsa)."""


class SecurityConfigError(Exception):
    """A security setting cannot be used (bad certificate file, unknown mechanism ...).

    The message is complete and meant for the operator: the broker prints it and exits
    without a stack trace.
    """
