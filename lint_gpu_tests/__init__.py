"""gpu-test-lint: find and fix hand-managed vLLM engines in GPU test suites.

The library surface lives in :mod:`lint_gpu_tests.api`; the CLI
(:mod:`lint_gpu_tests.interfaces.cli`) and the flake8 plugin
(:mod:`lint_gpu_tests.interfaces.flake8_plugin`) are thin layers over it. The runtime
runner that fixes target lives in :mod:`lint_gpu_tests.runtime` and imports
nothing from the linter.
"""

__version__ = "0.1.0"
