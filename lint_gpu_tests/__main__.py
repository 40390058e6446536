"""``python -m lint_gpu_tests``: the ``gpu-test-lint`` command."""

from lint_gpu_tests.interfaces.entry import run

if __name__ == "__main__":
    run()
