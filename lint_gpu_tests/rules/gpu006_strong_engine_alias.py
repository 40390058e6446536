"""GPU006 strong-engine-alias: a local name bound to the runner's engine."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from lint_gpu_tests.analysis.analysis import FunctionInfo, FunctionKind, ModuleAnalysis, RunnerCall
from lint_gpu_tests.fixplan.flow import STORE_METHODS, value_flow
from lint_gpu_tests.fixplan.plan import WrapPlan
from lint_gpu_tests.fixplan.planner import planner_for
from lint_gpu_tests.fixplan.proxy import proxy_plan
from lint_gpu_tests.fixplan.safety import WEAK_CALLABLES
from lint_gpu_tests.ftypes import Applicability, FixInfo, FixKind, Risky
from lint_gpu_tests.parsing.source import walk_breadth
from lint_gpu_tests.rule import Example, Hit, Rule
from lint_gpu_tests.rules._common import hit_at


class StrongEngineAlias(Rule):
    """Flags ``llm = runner.llm`` (a strong reference) inside a test."""

    code = "GPU006"
    name = "strong-engine-alias"
    summary = "A name holds the runner's engine strongly"
    message = "`{name} = {expr}` keeps the engine alive after the with-block; use a weak proxy"
    bare_message = ("`{name} = {expr}` keeps the engine alive after the runner's teardown, and "
                    "`{runner}` is not in a with-statement (GPU005, line {line}); use a weak "
                    "proxy")
    container_message = ("`{holder}` holds `{expr}` strongly, keeping the engine alive after "
                         "the with-block; hold a weak proxy")
    fix_title = "Bind to `weakref.proxy(...)`"
    fix_kinds = (FixKind.PROXY_ENGINE_REFERENCE,)
    what_it_does = (
        "Checks for a name bound to the runner's engine (`runner.llm`, `runner.model`, or "
        "the configured `runner-attribute`) without `weakref.proxy`."
    )
    why_bad = (
        "The runner shuts the engine down at the end of its block, but a local name still "
        "holding the engine object keeps it, and what it references, alive until the frame "
        "dies: in a failing test, until pytest drops the traceback."
    )
    fix_safety = (
        "Safe: the name is bound to `weakref.proxy(runner.llm)`, which behaves like the engine "
        "inside the block. Unsafe when the name is compared by identity, passed to a thread, "
        "or escapes the function, since a proxy is not the engine and dies with the block; "
        "and, for a runner not yet in a with-statement, when the GPU005 fix it depends on is "
        "unsafe."
    )
    options = ("runner-attribute",)
    INVALID = (
        Example(
            title="A strong alias in a test",
            source='''\
def test_chat(vllm_runner):
    with vllm_runner("facebook/opt-125m") as runner:
        llm = runner.llm  # error: GPU006
        assert llm.chat([{"role": "user", "content": "hi"}])
''',
        ),
    )
    VALID = (
        Example(
            title="A weak proxy",
            source='''\
import weakref


def test_chat(vllm_runner):
    with vllm_runner("facebook/opt-125m") as runner:
        llm = weakref.proxy(runner.llm)
        assert llm.chat([{"role": "user", "content": "hi"}])
''',
        ),
    )

    def check(self, module: ModuleAnalysis) -> Iterator[Hit]:
        planner = planner_for(module)
        attrs = module.runner_attributes()
        for func in module.functions:
            names = module.function_bindings(func)
            if not names.runners:
                continue
            handed_out: set[str] = set()
            if func.kind is FunctionKind.FIXTURE:
                for node in module.nodes_of(func):
                    if isinstance(node, (ast.Yield, ast.Return)) and isinstance(
                        node.value, ast.Name
                    ):
                        handed_out.add(node.value.id)
            for value, bound, holder in _strong_references(module, func, names.runners,
                                                           attrs):
                if set(bound) & handed_out:
                    continue
                # Every value that can reach the alias (containers, bound methods, ...)
                # must die with the runner's block too.
                flow = value_flow(func.node, func.node.body, set(bound), None,
                                  helpers=planner.helpers)
                escape = flow.problem or flow.unfollowed_call(func.node.body)
                for stmt in func.node.body:
                    escape = escape or planner.escape(stmt, set(bound), flow.tainted,
                                                       func.kind is FunctionKind.FIXTURE)
                runner = value.value.id if isinstance(value.value, ast.Name) else ""
                block = _enclosing_with(module, value, runner)
                if escape is None and block is not None and any(
                    isinstance(n, ast.Name) and n.id in flow.tainted
                    and isinstance(n.ctx, ast.Load)
                    and id(n) not in block for n in module.nodes_of(func)
                ):
                    escape = Risky(f"`{bound[0]}` is used after the runner's block, where a "
                                   "proxy is dead")
                if escape is None and holder is not None:
                    escape = Risky(f"`{bound[0]}` holds the engine in a container: code reading "
                                   "its elements gets a `weakref.proxy` (identity checks and "
                                   "hashing see the proxy, not the engine)")
                plan = proxy_plan(module, value.lineno, yielded=False,
                                  expr=None if isinstance(module.parent(value), (
                                      ast.Assign, ast.AnnAssign)) else value)
                fix = FixInfo(Applicability.SAFE, self.fix_title, "",
                              FixKind.PROXY_ENGINE_REFERENCE, plan) if escape is None else \
                    FixInfo(Applicability.UNSAFE, self.fix_title, escape.reason,
                            FixKind.PROXY_ENGINE_REFERENCE, plan)
                weak = _weakly_referenced(module, func.node, set(bound))
                if weak is not None:
                    fix = FixInfo(Applicability.NONE, self.fix_title,
                                  f"`{weak}({bound[0]})` needs the engine itself: a proxy "
                                  "cannot be weakly referenced")
                message = self.message.format(name=bound[0], expr=ast.unparse(value)) \
                    if holder is None else self.container_message.format(
                        holder=holder, expr=ast.unparse(value))
                if holder is not None and (bound[0] not in module.bound_names(func)
                                           or bound[0] in func.params):
                    fix = FixInfo(Applicability.NONE, self.fix_title,
                                  f"`{bound[0]}` is not a local container of `{func.name}`: "
                                  "the engine kept in it outlives the runner's block")
                bare = _bare_runner_call(module, func, runner)
                if bare is not None:
                    # No with-block yet: GPU005 reports the runner, and this fix only keeps
                    # behaviour once the runner's own fix has run.
                    message = self.bare_message.format(
                        name=bound[0], expr=ast.unparse(value), runner=runner,
                        line=bare.call.lineno)
                    runner_fix = _runner_fix(module, bare)
                    if fix.applicability is Applicability.SAFE and \
                            runner_fix.applicability is not Applicability.SAFE:
                        fix = FixInfo(Applicability.UNSAFE, self.fix_title,
                                      f"the GPU005 fix of `{runner}` (line "
                                      f"{bare.call.lineno}) it depends on is "
                                      f"{runner_fix.applicability.value}: "
                                      f"{runner_fix.reason or 'no fix'}", fix.kind, fix.plan)
                yield hit_at(value, message, fix)


def _engine_of(value: ast.AST | None, runners: set[str], attrs: frozenset[str]
               ) -> ast.Attribute | None:
    """``value`` when it is ``runner.llm`` (the engine of one of ``runners``, by one of
    ``attrs``), else ``None``."""
    if isinstance(value, ast.Attribute) and value.attr in attrs and isinstance(
            value.value, ast.Name) and value.value.id in runners:
        return value
    return None


def _strong_references(module: ModuleAnalysis, func: FunctionInfo, runners: set[str],
                       attrs: frozenset[str]
                       ) -> Iterator[tuple[ast.Attribute, list[str], str | None]]:
    """The runner's engine held strongly in ``func``: ``(the runner.llm expression, the
    names holding it, None)`` for ``llm = runner.llm``, ``llm, p = runner.llm, x`` (the
    element bound to a name) and ``(llm := runner.llm)``; ``(expression, [container],
    container spelling)`` for ``box = [runner.llm]`` / ``{"e": runner.llm}`` (a display
    assigned to a name) and ``box.append(runner.llm)`` (a store method on a local name)."""
    for node in module.nodes_of(func):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            engine = _engine_of(value, runners, attrs)
            if engine is not None:
                if names:
                    yield engine, names, None
            elif isinstance(value, (ast.Tuple, ast.List)) and len(targets) == 1 and \
                    isinstance(targets[0], (ast.Tuple, ast.List)):
                pairs = list(zip(targets[0].elts, value.elts, strict=False))
                if len(targets[0].elts) == len(value.elts) and not any(
                        isinstance(e, ast.Starred) for pair in pairs for e in pair):
                    for target, elt in pairs:
                        engine = _engine_of(elt, runners, attrs)
                        if engine is not None and isinstance(target, ast.Name):
                            yield engine, [target.id], None
            elif isinstance(value, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and names:
                elts = value.values if isinstance(value, ast.Dict) else value.elts
                for elt in elts:
                    engine = _engine_of(elt, runners, attrs)
                    if engine is not None:
                        yield engine, names, names[0]
        elif isinstance(node, ast.NamedExpr):
            engine = _engine_of(node.value, runners, attrs)
            if engine is not None:
                yield engine, [node.target.id], None
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in STORE_METHODS and isinstance(node.func.value, ast.Name) \
                and isinstance(module.parent(node), ast.Expr):
            for arg in node.args:
                engine = _engine_of(arg, runners, attrs)
                if engine is not None:
                    yield engine, [node.func.value.id], node.func.value.id


def _bare_runner_call(module: ModuleAnalysis, func: FunctionInfo,
                      runner: str) -> RunnerCall | None:
    """The runner call of ``func`` bound to ``runner`` outside a with-statement
    (``runner = vllm_runner(...)``, which GPU005 reports), if any."""
    for call in module.runner_calls:
        if call.function is not func or call.context != "bare":
            continue
        parent = module.parent(call.call)
        if isinstance(parent, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == runner for t in parent.targets):
            return call
    return None


def _runner_fix(module: ModuleAnalysis, call: RunnerCall) -> FixInfo:
    """The fix GPU005 offers for ``call`` (the same plan its rule makes)."""
    plan = planner_for(module).runner_plan(call)
    return plan.fix_info("") if isinstance(plan, WrapPlan) else plan


def _weakly_referenced(module: ModuleAnalysis, func: ast.AST, names: set[str]) -> str | None:
    """The weakref callable (other than a one-argument ``weakref.proxy``, which the fix
    turns into the proxy itself) applied to one of ``names`` in ``func``, if any."""
    for node in walk_breadth(func):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
                and node.args[0].id in names):
            continue
        qualified = module.qualified(node.func)
        if qualified in WEAK_CALLABLES and not (qualified == "weakref.proxy"
                                                and len(node.args) == 1 and not node.keywords):
            return qualified
    return None


def _enclosing_with(module: ModuleAnalysis, node: ast.AST, runner: str) -> set[int] | None:
    """Ids of every node inside the with-statement that binds ``runner`` around ``node``."""
    current = module.parent(node)
    while current is not None:
        if isinstance(current, (ast.With, ast.AsyncWith)) and any(
            isinstance(item.optional_vars, ast.Name) and item.optional_vars.id == runner
            for item in current.items
        ):
            return {id(n) for n in walk_breadth(current)}
        current = module.parent(current)
    return None
