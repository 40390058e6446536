"""Imported by every interpreter started with ``tests/e2e`` on ``PYTHONPATH`` (the
differential runs' inner pytest and the processes it starts); does nothing except in a child
that ``create_new_process_for_each_test("spawn")`` started (``python -c ... <payload>
<result>``, the payload a ``gpu-test-lint-payload-*`` file) while the recorder records a
test (``$GPU_TEST_LINT_RECORD_CHILD`` set): there it installs the recorder's engine hooks
(``recorder.install_child``), so the differential comparison sees the child's engines.
"""

import os
import sys

_CHILD_RECORD = os.environ.get("GPU_TEST_LINT_RECORD_CHILD")
if _CHILD_RECORD and sys.argv[:1] == ["-c"] and len(sys.argv) == 3 and \
        os.path.basename(sys.argv[1]).startswith("gpu-test-lint-payload-"):
    import recorder

    recorder.install_child(_CHILD_RECORD)
