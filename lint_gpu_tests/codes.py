"""Every code the checker can report, as data (the bottom layer: imports no module of the
package).

Configuration validates ``select``/``ignore`` against these without importing the rules: a
rule's code and name come from its module's file name, ``rules/gpuNNN_kebab_name.py``, or
its package's folder name, ``rules/gpuNNN_kebab_name/`` (``GPUNNN``, ``kebab-name``);
``tests/test_layers.py`` checks that :data:`RULE_CODES` matches the rule registry
(:data:`lint_gpu_tests.rules.ALL_RULES`), and :func:`lint_gpu_tests.rules.register` adds
the code of a rule from outside the package (to :data:`OPT_IN_CODES` too).
"""

from __future__ import annotations

import os
import re

#: A rule module's file name: ``gpu001_engine_outside_runner.py``, or a rule package's
#: folder name: ``gpu007_engines_oversubscribe_device`` (its ``__init__.py`` holds the rule).
RULE_MODULE = re.compile(r"gpu(?P<number>\d{3})_(?P<name>[a-z0-9_]+)(?P<suffix>\.py)?")


def rule_modules() -> dict[str, str]:
    """Rule code -> the name of its module (or package) in ``lint_gpu_tests/rules/``, in code
    order."""
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")
    found = {}
    for entry in os.listdir(folder):
        match = RULE_MODULE.fullmatch(entry)
        if match is not None and (match.group("suffix") or os.path.isfile(
                os.path.join(folder, entry, "__init__.py"))):
            found[f"GPU{match.group('number')}"] = entry.removesuffix(".py")
    return dict(sorted(found.items()))


#: Rule code -> kebab-case name, in code order (``lint_gpu_tests/rules/``).
RULE_CODES: dict[str, str] = {
    code: module.split("_", 1)[1].replace("_", "-") for code, module in rule_modules().items()
}

#: The codes of the rules from outside the package (:func:`lint_gpu_tests.rules.register`
#: adds them): such a rule is off by default, as flake8's off-by-default extensions and ruff's
#: preview rules are, and runs only where ``select`` or ``extend-select`` names its code in
#: full (:meth:`lint_gpu_tests.config.Config.is_code_enabled`); ``GPU`` and ``ALL`` do not.
OPT_IN_CODES: set[str] = set()

PARSE_ERROR_CODE = "GPU900"
"""A file that does not parse (reported, never rewritten)."""
PARSE_ERROR_NAME = "syntax-error"
INTERNAL_ERROR_CODE = "GPU999"
"""The flake8 plugin's report of a rule that crashed on a file."""
