"""Fix planning on the ``ast`` tree: which statements a rewrite covers and how safe it is.

The checker decides here, without LibCST, whether each violation has a safe, unsafe or no
fix (README, "Fix safety"); the codemods in ``lint_gpu_tests/codemods/`` apply the plans. One
concern a
module, from the bottom up (each imports only the ones above it in this list):

- :mod:`~lint_gpu_tests.fixplan.groups`: engines that do not live in one name (kept in a
  container, made by a factory fixture, rebound in the branches of an ``if``).
- :mod:`~lint_gpu_tests.fixplan.blocks`: where a statement sits (its block, the statements
  nested in it, whether it shares its line), and the names a statement reads or binds.
- :mod:`~lint_gpu_tests.fixplan.plan`: :class:`~lint_gpu_tests.fixplan.plan.WrapPlan`, the
  plan as data, and the runner's argument conventions (``VLLM_TARGET_DEFAULTS``,
  ``RENAMED_KWARGS``).
- :mod:`~lint_gpu_tests.fixplan.flow`: value flow (which names can reach the engine, live
  ranges of derived names) and summaries of the module's own helper functions.
- :mod:`~lint_gpu_tests.fixplan.cleanup`: recognising manual cleanup statements and
  finalizers that the runner's teardown replaces.
- :mod:`~lint_gpu_tests.fixplan.safety`: what makes a fix unsafe or impossible (escapes,
  identity, hashing, arguments, ``compilation_config``) and the weak-reference calls the
  fix rewrites.
- :mod:`~lint_gpu_tests.fixplan.planner`: the :class:`~lint_gpu_tests.fixplan.planner.Planner`
  that puts these together into a plan per construction, and ``planner_for``.
- :mod:`~lint_gpu_tests.fixplan.isolate`: plans for the ``isolate`` fix strategy.
- :mod:`~lint_gpu_tests.fixplan.classes`: plans for helper classes that own an engine.
- :mod:`~lint_gpu_tests.fixplan.xunit`: plans for xunit set-ups that store an engine.
- :mod:`~lint_gpu_tests.fixplan.factories`: factory helpers and their callers as one unit.
- :mod:`~lint_gpu_tests.fixplan.factory_fixtures`: a test module's factory fixtures and
  their callers as one unit, planned as a factory helper's.

Import what you use from its module; this file re-exports nothing.
"""
