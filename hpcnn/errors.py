"""Errors a run reports as one line: importable without TensorFlow, so the CLI can catch them
before the engine is loaded."""


class RunError(RuntimeError):
    """A run failed for a reason outside hpcnn's code (exit code 1): bad input data, a lost peer task."""
