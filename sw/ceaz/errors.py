"""Exceptions that name what is wrong, so callers can tell bad input from bad streams."""


class CeazError(Exception):
    """Base class of every error ceaz raises on purpose."""


class CorruptStreamError(CeazError, ValueError):
    """A compressed stream is truncated, damaged or not a ceaz stream at all."""


class DeviceError(CeazError, RuntimeError):
    """The compressor card (real or simulated) reported an error or did not answer."""
