"""The rule registry: every rule module of this package, one rule a module, plus the rules
added with :func:`register`. ``ALL_RULES`` is ordered by code.

A module ``gpuNNN_kebab_name.py`` here is found by its name
(:func:`lint_gpu_tests.codes.rule_modules`) and its :class:`~lint_gpu_tests.rule.Rule`
subclass of that code is the rule.
"""

from __future__ import annotations

import importlib

from lint_gpu_tests import codes
from lint_gpu_tests.ftypes import Trigger
from lint_gpu_tests.rule import Rule


def _rule_of(code: str, module_name: str) -> type[Rule]:
    module = importlib.import_module(f"{__name__}.{module_name}")
    found = [value for value in vars(module).values()
             if isinstance(value, type) and issubclass(value, Rule)
             and value.__module__ == module.__name__ and getattr(value, "code", None) == code]
    if len(found) != 1:
        raise ImportError(f"{module.__name__} defines {len(found)} rules of code {code}, "
                          "not one")
    return found[0]


ALL_RULES: list[type[Rule]] = [_rule_of(code, name)
                               for code, name in codes.rule_modules().items()]


def register(rule: type[Rule]) -> None:
    """Add ``rule`` (a :class:`~lint_gpu_tests.rule.Rule` subclass from outside the package)
    to the registry and its code to :data:`lint_gpu_tests.codes.RULE_CODES` and
    :data:`lint_gpu_tests.codes.OPT_IN_CODES`: it is off by default, and where ``select`` or
    ``extend-select`` names its code in full it is prefiltered, checked, fixed (by the
    codemods of its ``fix_kinds``) as the package's own rules are. It is documented as they
    are whether selected or not.

    Raises:
        ValueError: when another rule already has its code.
    """
    if any(known.code == rule.code and known is not rule for known in ALL_RULES):
        raise ValueError(f"code {rule.code} is taken")
    if rule not in ALL_RULES:
        ALL_RULES.append(rule)
        ALL_RULES.sort(key=lambda known: known.code)
    entries = sorted({**codes.RULE_CODES, rule.code: rule.name}.items())
    codes.RULE_CODES.clear()
    codes.RULE_CODES.update(entries)
    codes.OPT_IN_CODES.add(rule.code)


def outside_rules() -> list[type[Rule]]:
    """The rules of the registry that are not this package's own (added with
    :func:`register`): the result cache keys on them and worker processes must see them
    (:func:`lint_gpu_tests.running.cache.code_stamp`, ``lint_gpu_tests.running.run``)."""
    return [rule for rule in ALL_RULES if not rule.__module__.startswith(f"{__name__}.")]


def package_rules() -> list[type[Rule]]:
    """The package's own rules (the registry less :func:`outside_rules`), in code order: what
    ``docs/rules.md`` and the README's table of rules document."""
    outside = outside_rules()
    return [rule for rule in ALL_RULES if rule not in outside]


def rule_by_code(code: str) -> type[Rule] | None:
    """Return the rule class for ``code`` (case-insensitive), or ``None``."""
    code = code.upper()
    return next((rule for rule in ALL_RULES if rule.code == code), None)


def triggers_of(rule_codes: tuple[str, ...]) -> tuple[Trigger | str, ...]:
    """What the rules ``rule_codes`` start from (their :attr:`Rule.triggers`, each once, in a
    stable order), for :func:`lint_gpu_tests.parsing.prefilter.prefilter_for`."""
    found: dict[Trigger | str, None] = {}
    for code in rule_codes:
        rule = rule_by_code(code)
        for trigger in rule.triggers if rule is not None else (Trigger.ENGINE,):
            found[trigger] = None
    return tuple(sorted(found, key=lambda t: (isinstance(t, str), str(t))))
