"""What every input source offers the step runners: one small interface."""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import tensorflow as tf

from hpcnn.inputs.records import DataError

Batch = Tuple[tf.Tensor, tf.Tensor]  # (images, labels) of one replica


class StepInput(NamedTuple):
    """What one step reads: each replica's batch, on its device, and the ops staging the next ones.

    ``staging`` is None where nothing moves between steps. A ``tf.function`` runs
    it by itself (the ops are stateful); a graph session must fetch it with the step.
    """

    batches: List[Batch]
    staging: Optional[tf.Operation]


class InputSource:
    """Base of the input sources.

    * ``next_batches()``: called while the step is built, returns its ``StepInput``;
    * ``warm_up_stages()``: functions building the ops that fill the pipeline, in
      order (a graph session runs them once); ``warm_up()`` runs them eagerly;
    * ``initializer``: an op a graph session runs once before anything else, or None;
    * ``diagnose(error)``: a message naming the bad input behind a step's ``error``, or None.

    Every source is built for this process's replicas, ``first_replica`` onward
    among a cluster's ``total_replicas`` (0: just this process's).
    """

    initializer: Optional[tf.Operation] = None

    def next_batches(self) -> StepInput:
        raise NotImplementedError

    def warm_up_stages(self) -> List[Callable[[], Sequence[tf.Operation]]]:
        return []

    def warm_up(self) -> None:
        """Fills the pipeline in eager mode (each stage compiled once, on the first call)."""
        if getattr(self, "_warm", None) is None:
            self._warm = [_for_effect(stage) for stage in self.warm_up_stages()]
        for stage in self._warm:
            stage()

    def diagnose(self, error: Exception) -> Optional[str]:
        return None

    def raise_if_bad_data(self, error: Exception, where: str = "") -> None:
        """Raises ``DataError`` (``where`` + the diagnosis) when bad input caused ``error``; else returns,
        for the caller to re-raise ``error``. Both step runners call it on a failed step."""
        message = self.diagnose(error)
        if message is not None:
            raise DataError(where + message) from None


def _for_effect(stage):
    """``stage`` compiled to run for its assignments (a tf.function may not return ops)."""
    def run():
        stage()

    return tf.function(run, autograph=False)
