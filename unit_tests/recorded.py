"""Where the recorded samples live that the gate's tests judge (no TensorFlow: the gate's tests run without it)."""

import json
import os

_UNIT_TESTS = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(_UNIT_TESTS, "data")
# the shipped records of `hpcnn-perf gate-quality` (baselines/README.md says what each is)
QUALITY_RECORDS = os.path.join(os.path.dirname(_UNIT_TESTS), "baselines", "quality")
THREE_STEP_ROUNDS = os.path.join(QUALITY_RECORDS, "three-step-rounds")  # the design before paired.round_steps
PAIR_LEVEL_TEST = os.path.join(QUALITY_RECORDS, "pair-level-test")  # the design before blocks of process pairs
FIXED_REBUILD_ORDER = os.path.join(QUALITY_RECORDS, "fixed-rebuild-order")  # before rebuilds took turns

# gate-quality --mode=stored on the Zen 4 runner, 07:57-09:07 on 2026-11-26, before failures were confirmed: two
# unchanged sessions failed in slow spells of the runner
SLOW_SPELLS = os.path.join(DATA, "zen4_stored_slow_spells.json")
# gate-quality --mode=stored on the Zen 4 runner, 2026-11-28 from 05:44, two days after its file's newest session
# (the gate of a1d3cc9): three planted 25% drops of alexnet were cleared by re-measurements with the runner beyond
# the speeds its baselines saw
# (shipped in baselines/quality until the run below)
TWO_DAYS_LATER = os.path.join(DATA, "zen4_stored_two_days_later.json")
# gate-quality --mode=stored on the Zen 4 runner, 2026-11-28 11:13-12:30, against the file of eight occasions (the
# gate of d41542b): one unchanged session failed tiny_resnet, confirmed, the runner at 0.81x its recorded speed
# (shipped in baselines/quality until the run of 13:57-15:03 that day, by the gate of the slope across occasions)
EIGHT_OCCASIONS = os.path.join(DATA, "zen4_stored_eight_occasions.json")


def load(name):
    """A recorded sample, parsed: a file name in unit_tests/data, or the path of any record (a shipped one)."""
    with open(os.path.join(DATA, name)) as f:
        return json.load(f)
