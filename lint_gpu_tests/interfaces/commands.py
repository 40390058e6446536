"""The commands of ``gpu-test-lint`` besides ``check`` (:mod:`lint_gpu_tests.interfaces.cli` adds
them to its group): ``rule CODE``, ``rules``, ``prove`` and ``server``.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

import click

from lint_gpu_tests.config import FIX_STRATEGIES, TARGETS, ConfigError
from lint_gpu_tests.interfaces.cli_options import fail

__all__ = ["prove_command", "rule_command", "rules_command", "server_command"]


@click.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True,
              help="Explain every rule, and the codes that are not rules (GPU900, GPU999).")
def rule_command(code: str | None, show_all: bool) -> None:
    """Explain rule CODE (What it does, Why is this bad?, Example, Use instead, ...)."""
    from lint_gpu_tests.report.docs import PSEUDO_RULES, pseudo_rule, render_rule
    from lint_gpu_tests.rules import ALL_RULES, rule_by_code

    if show_all:
        click.echo(_for_terminal("\n".join([*(render_rule(rule) for rule in ALL_RULES),
                                            *(pseudo_rule(code) for code in PSEUDO_RULES)])),
                   nl=False)
        return
    if code is None:
        fail("give a rule code, e.g. `gpu-test-lint rule GPU001`, or --all")
    rule = rule_by_code(code)
    if rule is None:
        if code.upper() in PSEUDO_RULES:
            click.echo(_for_terminal(pseudo_rule(code)), nl=False)
            return
        fail(f"unknown rule code `{code}` (see `gpu-test-lint rules`)")
    click.echo(_for_terminal(render_rule(rule)), nl=False)


def _for_terminal(text: str) -> str:
    """``text`` (a rule's Markdown) with its prose wrapped to the terminal's width (at most
    100 columns) when standard output is a terminal, as it is printed for reading; code
    blocks, tables and headings as they are. Unchanged when piped (the Markdown of
    docs/rules.md)."""
    if not sys.stdout.isatty():
        return text
    width = min(shutil.get_terminal_size().columns, 100)
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or len(line) <= width or line.startswith(("|", "#", "```")):
            out.append(line)
            continue
        bullet = line[:2] if line.startswith(("- ", "* ")) else ""
        out.append(textwrap.fill(line, width, subsequent_indent=" " * len(bullet),
                                 break_long_words=False, break_on_hyphens=False))
    return "\n".join(out)


@click.command("rules")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown"]), default="table",
              show_default=True, help="`markdown` prints docs/rules.md.")
def rules_command(fmt: str) -> None:
    """List every rule: code, name, whether it has a fix, summary."""
    from lint_gpu_tests.report.docs import render_rules_markdown, render_rules_table

    click.echo(render_rules_table() if fmt == "table" else render_rules_markdown(), nl=False)


class _ProveCommand(click.Command):
    """``prove``'s command: the arguments after ``--`` are the user's pytest arguments."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Keep what follows ``--`` for pytest (``ctx.meta["pytest_args"]``)."""
        if "--" in args:
            at = args.index("--")
            ctx.meta["pytest_args"] = tuple(args[at + 1:])
            args = args[:at]
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        """The usage line ends with ``[-- PYTEST ARGS]...``."""
        return [*super().collect_usage_pieces(ctx), "[-- PYTEST ARGS]..."]


@click.command("prove", cls=_ProveCommand)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--unsafe-fixes", is_flag=True, help="Fix with unsafe fixes too.")
@click.option("--fix-strategy", type=click.Choice(FIX_STRATEGIES), default=None,
              help="How hand-managed engines are fixed (as `check`).")
@click.option("--target", type=click.Choice(TARGETS), default=None,
              help="Which engine API fixes write (as `check`).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Use this config file for every file (as `check`).")
@click.option("--apply", is_flag=True,
              help="Write the fix to the modules proven the same (without it, nothing is "
                   "written).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="pytest sessions side by side on a machine without devices to schedule "
                   "(mind the engines your machine holds).")
@click.option("--devices", default=None, envvar="GPU_TEST_LINT_PROVE_DEVICES",
              help="Devices to give sessions, e.g. 0,1,2 (default: the visible ones).")
@click.option("--sessions-per-device", type=click.IntRange(min=1), default=1,
              show_default=True,
              help="Sessions sharing a device at once; their engines start one at a time.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
              show_default=True,
              help="Where sessions run: this machine, or tasks of a Ray cluster (needs "
                   "gpu-test-lint[ray]).")
@click.option("--address", default=None,
              help="The Ray cluster's address, with --executor ray (default: $RAY_ADDRESS, "
                   "else a local cluster).")
@click.option("--shard", default=None, metavar="K/N",
              help="Prove only the K-th of N parts of the modules (`prove merge REPORTS...` "
                   "joins the parts' JSON reports).")
@click.option("--texts", type=click.Choice(["auto", "exact", "outcome"]), default="auto",
              show_default=True,
              help="How generated texts are compared: auto (greedy or seeded exactly, "
                   "others by outcome only), exact, or outcome (not compared).")
@click.option("--session-timeout", type=click.FloatRange(min=1), default=900.0,
              show_default=True, help="Seconds one module's pytest session may run.")
@click.option("--time-limit", type=click.FloatRange(min=0), default=None,
              help="Seconds after which no session starts (a re-run resumes).")
@click.option("--output-format", type=click.Choice(["text", "json", "sarif"]), default="text",
              show_default=True)
@click.option("--no-cache", is_flag=True, help="Neither read nor write recordings.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Cache directory; recordings go under prove/ in it.")
@click.option("--work-dir", type=click.Path(file_okay=False), default=None,
              help="Keep the two copies (and each session's log) in this folder.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.pass_context
def prove_command(ctx: click.Context, paths: tuple[str, ...], unsafe_fixes: bool,
                  fix_strategy: str | None, target: str | None, config_file: str | None,
                  apply: bool, jobs: int, devices: str | None, sessions_per_device: int,
                  executor: str, address: str | None, shard: str | None, texts: str,
                  session_timeout: float, time_limit: float | None, output_format: str,
                  no_cache: bool, cache_dir: str | None, work_dir: str | None,
                  quiet: bool) -> None:
    """Prove the fixes of PATHS on your own tests: run them (pytest, with the arguments
    after --) before and after the fix, and compare each test's outcome, engines, texts and
    leaks. Exit 0 when every module ran and is proven (none differs or is inconclusive), 1
    otherwise, 2 on an error. `prove merge REPORTS...` joins the JSON reports of --shard
    runs into one verdict (and --apply writes it)."""
    from lint_gpu_tests.api import PathNotFoundError
    from lint_gpu_tests.prove import ProveOptions, prove_paths
    from lint_gpu_tests.prove.merge import merge_paths
    from lint_gpu_tests.prove.report import render
    from lint_gpu_tests.prove.shard import parse_shard

    say = None if quiet else (lambda line: click.echo(line, err=True))
    if paths[:1] == ("merge",):
        try:
            merged = merge_paths(paths[1:], write=apply, progress=say)
        except (OSError, ValueError) as exc:
            fail(str(exc))
        click.echo(render(merged, output_format, os.getcwd()), nl=False)
        sys.exit(0 if merged.proven else 1)

    overrides = {k: v for k, v in (("fix_strategy", fix_strategy), ("target", target))
                 if v is not None}
    options = ProveOptions(unsafe_fixes=unsafe_fixes, overrides=overrides,
                           config_file=os.path.abspath(config_file) if config_file else None,
                           pytest_args=ctx.meta.get("pytest_args", ()), jobs=jobs,
                           devices=devices, sessions_per_device=sessions_per_device,
                           session_timeout_s=session_timeout, time_limit_s=time_limit,
                           texts=texts, apply=apply, cache=not no_cache, cache_dir=cache_dir,
                           work_dir=work_dir, executor=executor, address=address)
    try:
        options.shard = parse_shard(shard) if shard else None
        result = prove_paths(list(paths), options, progress=say)
    except (PathNotFoundError, ConfigError, ValueError) as exc:
        fail(str(exc))
    click.echo(render(result, output_format, os.getcwd()), nl=False)
    sys.exit(0 if result.proven else 1)


@click.command("server")
def server_command() -> None:
    """Run the language server (for editors) on stdin and stdout: diagnostics and fixes.

    Needs pygls: pip install 'gpu-test-lint[server]'.
    """
    try:
        from lint_gpu_tests.interfaces.server import serve
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in ("pygls", "lsprotocol"):
            raise
        fail(f"the language server needs pygls ({missing} is not installed): "
             "pip install 'gpu-test-lint[server]'")
    serve()
