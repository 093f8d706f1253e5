"""The one exception a handler raises to hand a call back to torch."""


class Fallback(Exception):
    """Run torch's own function; reason says why (counted in the coverage)."""
