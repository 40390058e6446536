"""The ways in, thin layers over ``lint_gpu_tests.api``.

``cli`` is the ``gpu-test-lint`` command (click), with its options (``cli_options``)
and its other commands (``commands``); ``flake8_plugin`` is the flake8 plugin;
``server`` is the language server (``gpu-test-lint server``).
"""
