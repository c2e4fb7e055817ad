"""Where the recorded samples live that the gate's tests judge (no TensorFlow: the gate's tests run without it)."""

import os

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# gate-quality --mode=stored on the Zen 4 runner, 07:57-09:07 on 2026-11-26, before failures were confirmed: two
# unchanged sessions failed in slow spells of the runner
SLOW_SPELLS = os.path.join(DATA, "zen4_stored_slow_spells.json")
