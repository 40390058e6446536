"""Keeping a ``check`` run's answer for :mod:`lint_gpu_tests.running.answers` to replay: when
the run may be replayed at all, and what its snapshot must cover besides the directories the
run listed (the trees whose helpers its modules may import, a project runner's module)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import lint_gpu_tests.running.answers as answers

if TYPE_CHECKING:
    from lint_gpu_tests.config import ConfigResolver
    from lint_gpu_tests.interfaces.cli_options import CheckArgs
    from lint_gpu_tests.report.present import Presentation
    from lint_gpu_tests.running.run import RunResult


def keep_answer(args: CheckArgs, config: ConfigResolver, result: RunResult,
                shown: Presentation) -> None:
    """Keep ``shown`` (the text pieces and exit status of a ``check`` of ``args.paths``) as
    the answer of the run that is collecting its directories
    (:data:`~lint_gpu_tests.running.answers.LISTED` set), when :func:`may_keep_answer` says
    it may be replayed; else keep nothing."""
    listed = answers.LISTED
    if listed is None or not may_keep_answer(args, config, result, shown):
        return
    from lint_gpu_tests.checking.helper_index import list_tree, tree_root

    for path in args.paths or (".",):  # the trees whose helpers the modules may import
        absolute = os.path.abspath(path)
        root = tree_root(absolute if os.path.isdir(absolute) else os.path.dirname(absolute))
        if root not in listed:  # the helper index walked it already for a file of it
            list_tree(root)
    for settings in config.configs():  # a project's runner: its signature decides fixes
        if settings.runner_module is not None:
            module = os.path.join(os.path.abspath(settings.root),
                                  *settings.runner_module[0].split("."))
            listed.update((os.path.dirname(module), module))
    answers.keep(args.paths, [(e, p) for e, p in shown.pieces if isinstance(p, str)],
                 shown.status)


def may_keep_answer(args: CheckArgs, config: ConfigResolver, result: RunResult,
                    shown: Presentation) -> bool:
    """True when the run's output may be replayed by a later run of the same command
    (:mod:`lint_gpu_tests.running.answers`): it wrote no file, read no stdin, cache nor file
    that an option or setting names (``--config``, ``--leak-report``, a baseline), ran only
    the package's rules, met no error and printed only text."""
    from lint_gpu_tests.config import baselines_in_force

    run, mode, selection = args.run, args.mode, args.selection
    if run.fix or run.diff or not run.cache or mode.leak_report or mode.update_baseline or \
            mode.ratchet or selection.config_file or selection.baseline or "-" in args.paths:
        return False
    if result.problems or any(f.error for f in result.files) or \
            any(isinstance(p, bytes) for _, p in shown.pieces):
        return False
    rules = sys.modules.get("lint_gpu_tests.rules")
    if rules is not None and rules.outside_rules():
        return False
    return not baselines_in_force(args.paths, config)
