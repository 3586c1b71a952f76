"""The binary these tests use where they need one (`assert_no_leak`'s verdict is the
binary's): `$LEAKSPY_BIN` when set (`scripts/test.sh` sets it), else this checkout's
`cargo build`, never whatever else is installed."""

import os
from pathlib import Path

_BUILT = Path(__file__).resolve().parents[2] / "target" / "debug" / "leakspy"
if not os.environ.get("LEAKSPY_BIN") and _BUILT.is_file():
    os.environ["LEAKSPY_BIN"] = str(_BUILT)
