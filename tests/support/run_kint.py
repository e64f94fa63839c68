"""The test suite's `kint` launcher: `python run_kint.py ARGS...` is `kint ARGS...` (the
console script's own `kint.entry.main`), with the command's side of `kint_test_timings`
installed first, so that a test meets a fixed wait of the command's in seconds.
Everything else is the real command."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kint_test_timings  # noqa: E402
from kint.entry import main  # noqa: E402

if __name__ == "__main__":
    kint_test_timings.install_cli()
    main()
