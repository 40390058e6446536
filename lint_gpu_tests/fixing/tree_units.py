"""Fix units across modules: a factory helper of one module of the tree (``tests/utils.py``:
``def setup_engine(...): return LLM(...)``) and every call of it in the tree's other modules,
planned, reported and applied as one fix; and a conftest's factory fixture (``make_llm``
handing out ``def _make(**kw): return LLM(...)``) with every call of what it hands out in the
modules pytest gives it to (:func:`_fixture_unit`; the per-file check withholds those fixes
too, saying :data:`~lint_gpu_tests.ftypes.CONFTEST_FACTORY`).

The per-file check withholds the fix of a violation about an engine from another module's
factory helper (its reason says :data:`~lint_gpu_tests.ftypes.IMPORTED_FACTORY`).
After every file of a run is checked (and, with ``--fix``, fixed on its own), the run hands
the files with such a violation to :func:`plan_tree_units`, in its own process:

* each helper those files call is found through the tree's helper index
  (:meth:`~lint_gpu_tests.analysis.analysis.ModuleAnalysis.helper_called`), and its module analysed;
* every ``.py`` file of the tree
  (:func:`~lint_gpu_tests.checking.helper_index.tree_files`) whose bytes
  name the helper is analysed, and every reference to the helper there found as the index
  resolves it (``from tests.utils import setup_engine``, ``import tests.utils as u``, an
  alias, a re-export): a call joins the unit; a reference that is not a call (the helper
  passed as a value), or any reference in a file the run does not check, leaves the whole
  unit without a fix, the reason naming that module and line;
* the unit is planned once (:func:`~lint_gpu_tests.fixplan.factories.plan_factory_unit`,
  each call on its own module's analysis): as safe as its least safe caller's block; no fix
  when one call cannot be rewritten, the reason naming it.
* with ``target = "vllm"`` the helper enters vLLM's ``VllmRunner``, imported from the
  project's tests/conftest.py (``from tests.conftest import VllmRunner``), not the
  ``vllm_runner`` fixture, which its callers in other modules are not given; no fix when the
  project has no tests/conftest.py defining it.

In a run that only reports, the process that checked a caller has already planned its calls
(:func:`caller_record`, handed back with the file's result): such a caller is not analysed
again here, only the helpers' modules and the callers without a record (a cached result,
bytes changed since).

Each violation the unit removes carries its fix (the helper's GPU001 where its module is
checked; each caller's GPU003/GPU004, and its GPU001 at the call where the helper's module
is out of the rules' scope). With ``--fix`` (or ``--diff``) the unit's files are
rewritten together (:func:`unit_sources`): all new texts are made and parsed first, then
written with :func:`~lint_gpu_tests.parsing.writer.atomic_write_all` (every temporary file first,
then the renames), so a failure before the renames changes no file.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from lint_gpu_tests.analysis.analysis import FunctionKind, ImportedHelper, ModuleAnalysis
from lint_gpu_tests.checking.checker import check_module
from lint_gpu_tests.checking.conftest_index import (
    ConftestIndex,
    conftest_engine_fixtures,
    conftest_files,
)
from lint_gpu_tests.checking.helper_index import tree_files, tree_root
from lint_gpu_tests.config import Config
from lint_gpu_tests.fixplan.factories import (
    CallerGroup,
    FactoryPlan,
    caller_group,
    caller_groups,
    factory_title,
    module_call_sites,
    plan_factory_unit,
    tree_path,
)
from lint_gpu_tests.fixplan.factory_fixtures import (
    call_sites,
    conftest_fixture_of,
    handed_out_factory,
    self_use,
)
from lint_gpu_tests.ftypes import (
    CONFTEST_FACTORY,
    IMPORTED_FACTORY,
    Applicability,
    FixInfo,
    Location,
    Violation,
)
from lint_gpu_tests.parsing.source import parse_source, walk_breadth
from lint_gpu_tests.rules.gpu001_engine_outside_runner import own_fix

#: The kinds of helper summary (:data:`~lint_gpu_tests.analysis.analysis.ENGINE_HELPER`)
#: that a unit across modules rewrites: a factory (``"f"``) and one returning the engine in
#: a tuple (``"t"``).
UNIT_KINDS = ("f", "t")

#: An absolute import from the project's ``tests`` package, at the start of a line.
IMPORTS_TESTS = re.compile(rb"^[ \t]*(?:from[ \t]+tests[. \t]|import[ \t]+tests\b)", re.M)


@dataclass(frozen=True)
class ModuleUses:
    """Every reference to one factory helper in one module, as the unit needs them.

    Attributes:
        references: ``(line, is a call)`` of each, in source order.
        group: the calls planned (:func:`~lint_gpu_tests.fixplan.factories.caller_group`)
            where the module was checked, when every reference is a call; else ``None``.
        calls: the calls themselves, when the module's analysis is at hand to plan them on
            (``group`` is then ``None``).
    """

    references: tuple[tuple[int, bool], ...]
    group: CallerGroup | None = None
    calls: tuple[ast.Call, ...] = ()


@dataclass(frozen=True)
class CallerRecord:
    """What the units need of a module that calls factory helpers of other modules, made in
    the process that checked it (:func:`caller_record`), so that a run that only reports
    plans its units without checking the module again.

    Attributes:
        source: the bytes it was checked on (a module read with other bytes is checked
            again).
        called: each factory helper of another module it calls, in the order first called.
        uses: the references to each helper it refers to, by ``(module, name)``.
    """

    source: bytes
    called: tuple[ImportedHelper, ...]
    uses: dict[tuple[str, str], ModuleUses]


@dataclass
class Member:
    """One module of a unit: the helper's, or one with calls of it.

    Attributes:
        path: the module's path as the run names it (the helper's module, when the run does
            not check it, as seen from the working directory).
        source: the bytes the unit was planned on.
        config: the settings it is fixed with.
        analysis: its analysis (the plan's lines refer to it); ``None`` for a module known
            by its :class:`CallerRecord` alone (a run that only reports).
        violations: its violations on ``source`` (empty for a module the run does not check).
        checked: whether the run checks it.
        record: its :class:`CallerRecord`, when it came with one.
    """

    path: str
    source: bytes
    config: Config
    analysis: ModuleAnalysis | None
    violations: list[Violation] = field(default_factory=list)
    checked: bool = True
    record: CallerRecord | None = None

    def called(self) -> list[ImportedHelper]:
        """The factory helpers of other modules it calls, in the order first called."""
        if self.record is not None:
            return list(self.record.called)
        assert self.analysis is not None
        return [helper for node in walk_breadth(self.analysis.tree)
                if (helper := self.analysis.helper_called(node)) is not None
                and helper.kind in UNIT_KINDS]

    def uses_of(self, helper: ImportedHelper) -> ModuleUses | None:
        """Its references to ``helper``, or ``None`` when it has none."""
        if self.record is not None:
            return self.record.uses.get((helper.module, helper.name))
        assert self.analysis is not None
        references = _references(self.analysis, helper)
        if not references:
            return None
        return ModuleUses(tuple((node.lineno, call is not None)  # type: ignore[attr-defined]
                                for node, call in references),
                          calls=tuple(call for _, call in references if call is not None))

    def group(self, uses: ModuleUses, helper: ImportedHelper) -> CallerGroup:
        """The calls of ``uses`` (of the factory ``helper``) planned on this module."""
        if uses.group is not None:
            return uses.group
        assert self.analysis is not None
        return caller_group(self.analysis, helper.name, uses.calls, tuple_place_of(helper))


def caller_record(module: ModuleAnalysis, source: bytes) -> CallerRecord | None:
    """The :class:`CallerRecord` of ``module`` (checked on ``source``), or ``None`` when it
    calls no factory helper of another module. Each helper's calls are planned here when
    every reference to it is a call."""
    found: dict[tuple[str, str], tuple[ImportedHelper, list[tuple[ast.AST, ast.Call | None]]]] = {}
    called: dict[tuple[str, str], ImportedHelper] = {}
    for node, helper, call in _helper_references(module):
        if helper.kind not in UNIT_KINDS:
            continue
        key = (helper.module, helper.name)
        found.setdefault(key, (helper, []))[1].append((node, call))
        if call is not None:
            called.setdefault(key, helper)
    if not called:
        return None
    uses: dict[tuple[str, str], ModuleUses] = {}
    for key, (helper, references) in found.items():
        references.sort(key=lambda r: (r[0].lineno, r[0].col_offset))  # type: ignore[attr-defined]
        calls = [call for _, call in references if call is not None]
        uses[key] = ModuleUses(
            tuple((node.lineno, call is not None)  # type: ignore[attr-defined]
                  for node, call in references),
            caller_group(module, helper.name, calls, tuple_place_of(helper))
            if len(calls) == len(references) else None)
    return CallerRecord(source, tuple(called.values()), uses)


@dataclass
class TreeUnit:
    """A factory helper of the tree (or a conftest's factory fixture) and every call of it:
    one fix, or none with the reason.

    Attributes:
        helper: the helper as the callers import it (for a fixture: kind ``"g"``, its name
            and the conftest's path from the tree's root).
        fix: the unit's plan, or the missing fix with its reason.
        members: the unit's modules by path, the helper's (the conftest's) first.
        fixture: the unit is a conftest's factory fixture's (:func:`_fixture_unit`).
        fallback: for a fixture's unit, the conftest's own fix of the factory's engine
            (GPU001 at ``fallback_line``), applied alone where the unit has no fix.
        fallback_line: the line of that engine.
    """

    helper: ImportedHelper
    fix: FactoryPlan | FixInfo
    members: dict[str, Member]
    fixture: bool = False
    fallback: FixInfo | None = None
    fallback_line: int = 0

    def marks(self, violation: Violation) -> bool:
        """True when the per-file check withheld ``violation``'s fix for this helper (for
        this conftest's factory fixture)."""
        fix = violation.fix
        if fix is None or fix.applicability is not Applicability.NONE:
            return False
        if self.fixture:
            return CONFTEST_FACTORY in fix.reason and \
                f"fixture `{self.helper.name}`" in fix.reason
        return IMPORTED_FACTORY in fix.reason and f"defined in `{self.helper.module}`" in \
            fix.reason and re.search(rf"`(?:[\w.]*\.)?{self.helper.name}\(\)`",
                                     fix.reason) is not None

    def covered(self, path: str, violation: Violation) -> bool:
        """True when the unit's rewrite of ``path`` removes ``violation``: the helper's own
        engine (GPU001), a caller's call of the helper it turns into a with-statement
        (GPU001, reported where the helper's module is out of the rules' scope), a
        caller's cleanup or shutdown ``try`` its with-block deletes, or a fixture's ``yield``
        of the engine inside that block, which then hands out the helper's weak proxy
        (GPU002)."""
        plan = self.fix
        if not isinstance(plan, FactoryPlan):
            return self.fallback is not None and violation.code == "GPU001" and \
                path == next(iter(self.members)) and \
                violation.location.row == self.fallback_line
        row = violation.location.row
        if path == plan.path and violation.code == "GPU001" and row == plan.call_line:
            return True
        # In the helper's own module (a test module others import it from) its callers'
        # cleanup has a fix of its own, which the unit's rewrite of that module replaces.
        return (self.marks(violation) or path == plan.path) and any(
            row == caller.line if violation.code == "GPU001" else
            caller.plan.site_line <= row <= caller.plan.end_line
            if violation.code == "GPU002" else
            row in caller.plan.remove_lines | caller.plan.unwrap_try_lines
            for caller in plan.callers if caller.path == path)

    def relabel(self, path: str, violations: Iterable[Violation]) -> list[Violation]:
        """``violations`` of the member ``path`` with the unit's fix on each it removes, and
        the reason of the missing fix on each it leaves."""
        helper, plan = self.helper, self.fix
        if self.fixture:
            return [self._relabelled(path, v) for v in violations]
        out: list[Violation] = []
        for v in violations:
            fix = v.fix
            assert fix is not None or not self.marks(v)
            if isinstance(plan, FactoryPlan) and self.covered(path, v):
                assert fix is not None  # GPU001 and a marked violation have a fix
                new = plan.fix_info() if v.code == "GPU001" and path == plan.path \
                    else plan.covered_fix(fix.title)
                out.append(replace(v, fix=new))
            elif self.marks(v):
                assert fix is not None
                if isinstance(plan, FactoryPlan):
                    reason = (f"the engine comes from `{helper.name}()`, defined in "
                              f"{helper.where}, and its rewrite into a context manager "
                              "keeps this statement")
                else:
                    reason = (f"the engine comes from `{helper.name}()`, defined in "
                              f"{helper.where}: {IMPORTED_FACTORY}, and its fix with every "
                              f"call of it in the tree has none: {plan.reason}")
                out.append(replace(v, fix=FixInfo.none(fix.title, reason)))
            elif isinstance(plan, FixInfo) and fix is not None and v.code == "GPU001" and \
                    self.members and path == next(iter(self.members)) and \
                    fix.applicability is Applicability.NONE and self._own_engine(v):
                out.append(replace(v, fix=FixInfo.none(fix.title, plan.reason)))
            else:
                out.append(v)
        return out

    def _relabelled(self, path: str, violation: Violation) -> Violation:
        """:meth:`relabel` of one violation of a conftest's factory fixture unit."""
        fix, plan, name = violation.fix, self.fix, self.helper.name
        if not self.marks(violation) or fix is None:
            return violation
        home = path == next(iter(self.members))
        if isinstance(plan, FactoryPlan):
            if self.covered(path, violation):
                return replace(violation, fix=plan.fix_info() if home and
                               violation.code == "GPU001" else plan.covered_fix(fix.title))
            return replace(violation, fix=FixInfo.none(fix.title, (
                f"the engine comes from `{name}(...)`, the factory that the fixture `{name}` "
                f"(`{self.helper.module}`) hands out, and its rewrite into a context manager "
                "keeps this statement")))
        if self.covered(path, violation):
            assert self.fallback is not None
            return replace(violation, fix=self.fallback)
        if home and violation.code == "GPU001":
            return replace(violation, fix=FixInfo.none(fix.title, plan.reason))
        return replace(violation, fix=FixInfo.none(fix.title, (
            f"the engine comes from `{name}(...)`, the factory that the fixture `{name}` "
            f"(`{self.helper.module}`) hands out and keeps no engine of, and its fix with "
            f"every call of it in the tree has none: {plan.reason}")))

    def _own_engine(self, violation: Violation) -> bool:
        """True when ``violation`` (a GPU001 of the helper's module) is the helper's engine."""
        home = next(iter(self.members.values())).analysis
        assert home is not None  # the helper's module is analysed (``_unit``)
        return any(s.call.lineno == violation.location.row and s.function is not None
                   and s.function.name == self.helper.name for s in home.engines)

    def applies(self, unsafe: bool) -> bool:
        """Whether ``--fix`` applies the unit: safe (or unsafe with ``unsafe``), and the fix
        of a violation the run reports (a selected one: a module calling two helpers seeds
        both units, though its selected violations may all be about one)."""
        fix = self.fix if isinstance(self.fix, FactoryPlan) else self.fallback
        return fix is not None and (
            fix.applicability is Applicability.SAFE or
            unsafe and fix.applicability is Applicability.UNSAFE) and any(
            self.covered(path, v) for path, member in self.members.items()
            for v in member.violations)


Reader = Callable[[str], "bytes | None"]
"""The current bytes of a file, by absolute path (``None``: it cannot be read)."""
MemberOf = Callable[[str, bool], "Member | None"]
"""The member of a unit that a file is, by absolute path, analysed when asked (``True``)
even where its record would do; ``None``: it cannot be read or parsed."""


def plan_tree_units(seeds: Iterable[str], checked: dict[str, str], read: Reader,
                    config_of: Callable[[str], Config], conftests: ConftestIndex,
                    recorded: Mapping[str, tuple[CallerRecord, list[Violation]]] | None = None
                    ) -> list[TreeUnit]:
    """The unit of each factory helper of another module that the files ``seeds`` call.

    Args:
        seeds: paths (as the run names them) of files with a violation :func:`marked`.
        checked: absolute path -> path as the run names it, of every file the run checks.
        read: the current bytes of a file.
        config_of: the settings of a file, by absolute path.
        conftests: the run's conftest index (the tree's helper entries come with it).
        recorded: absolute path -> the :class:`CallerRecord` and violations of a checked
            file, from the process that checked it: a file whose bytes are still those is
            not checked again. Only for a run that rewrites nothing (a unit's rewrite
            needs each module's analysis).

    Returns:
        One :class:`TreeUnit` per helper, in the order of its module and name.
    """
    analyses: dict[str, Member | None] = {}
    sources: dict[str, bytes | None] = {}  # each file read once, whatever helpers it names
    listings: dict[str, list[str]] = {}

    def read_once(absolute: str) -> bytes | None:
        if absolute not in sources:
            sources[absolute] = read(absolute)
        return sources[absolute]

    def files_of(root: str) -> list[str]:
        if root not in listings:
            listings[root] = tree_files(root)
        return listings[root]

    def member(absolute: str, analysed: bool = False) -> Member | None:
        if absolute not in analyses or analysed and (
                (found := analyses[absolute]) is not None and found.analysis is None):
            known = (recorded or {}).get(absolute)
            if not analysed and known is not None and absolute in checked and \
                    read_once(absolute) == known[0].source:
                analyses[absolute] = Member(checked[absolute], known[0].source,
                                            config_of(absolute), None, known[1],
                                            record=known[0])
            else:
                analyses[absolute] = _analyse(absolute, checked, read_once, config_of,
                                              conftests)
        return analyses[absolute]

    helpers: dict[tuple[str, str, str], ImportedHelper] = {}
    fixtures: dict[tuple[str, str], str] = {}  # (conftest, fixture) -> the tree's root
    for seed in seeds:
        absolute = os.path.abspath(seed)
        found = member(absolute)
        if found is None:
            continue
        root = tree_root(os.path.dirname(absolute))
        for helper in found.called():
            helpers.setdefault((root, helper.module, helper.name), helper)
        if any(v.fix is not None and CONFTEST_FACTORY in v.fix.reason
               for v in found.violations):
            analysed = member(absolute, True)
            for name in _conftest_fixtures_called(analysed) if analysed is not None else ():
                home = _fixture_home(absolute, name, member)
                if home is not None:
                    fixtures.setdefault((home, name), root)
    return [_unit(root, helper, member, read_once, files_of(root))
            for (root, _, _), helper in sorted(helpers.items())] + \
        [_fixture_unit(root, home, name, member, read_once, files_of(root))
         for (home, name), root in sorted(fixtures.items())]


def _conftest_fixtures_called(member: Member) -> set[str]:
    """The factory fixtures of conftests whose factories ``member`` calls (or, for a
    conftest, hands out: :func:`~lint_gpu_tests.fixplan.factory_fixtures.conftest_fixture_of`)."""
    module = member.analysis
    assert module is not None
    out = {name for name, line in module.factory_fixtures.items()
           if not line and name not in module.imported_factory_fixtures}
    out.update(name for site in module.engines
               if (name := conftest_fixture_of(module, site)) is not None)
    return out


def _fixture_home(absolute: str, name: str, member: MemberOf) -> str | None:
    """The conftest (an absolute path) that defines the fixture ``name`` the module at
    ``absolute`` is handed (the nearest one defining a fixture of that name: the module
    itself, for a conftest), when that fixture hands out a factory of engines; else
    ``None``."""
    own = [absolute] if os.path.basename(absolute) == "conftest.py" else []
    for conftest in own + conftest_files(absolute):
        found = member(conftest, True)
        module = found.analysis if found is not None else None
        fixture = module.top_fixture(name) if module is not None else None
        if fixture is not None:
            assert module is not None
            return conftest if module.factory_fixtures.get(name) == fixture.node.lineno \
                else None
    return None


def _fixture_unit(root: str, conftest: str, name: str, member: MemberOf, read: Reader,
                  files: list[str]) -> TreeUnit:
    """The unit of the factory fixture ``name`` of the conftest at ``conftest`` (absolute)
    in the tree at ``root`` whose ``.py`` files are ``files``: the factory the fixture
    hands out and every call of it in the tests and fixtures under the conftest's
    directory that pytest hands that fixture (no nearer conftest, nor the module, defines
    one of the name). No fix, the reason naming the module and line, where a module that
    may be handed the fixture uses it other than by calls (a string request, a helper's
    parameter, a value handed on), where such a module is not checked by the run, or where
    a module outside the conftest's directory that a file of the tree imports (or that is
    not known to be private to the tree) requests a fixture of the name (one of its tests
    may be inherited or imported under it); the conftest's own fix of the factory's
    engine (:func:`~lint_gpu_tests.rules.gpu001_engine_outside_runner.own_fix`) is then the
    unit's fallback."""
    shown = tree_path(conftest, root)
    helper = ImportedHelper(f"conftest-fixture:{shown}:{name}", "g", name, 0, "", shown)
    home = member(conftest, True)
    if home is None or home.analysis is None:
        return TreeUnit(helper, FixInfo.none(f"Make `{name}` hand out a context manager",
                                             f"`{shown}` cannot be read or parsed"), {},
                        fixture=True)
    module = home.analysis
    fixture = module.top_fixture(name)
    factory = handed_out_factory(module, fixture) if fixture is not None else None
    sites = [s for s in module.engines if factory is not None and s.function is factory]
    if fixture is None or factory is None or len(sites) != 1 or \
            conftest_fixture_of(module, sites[0]) != name:
        return TreeUnit(helper, FixInfo.none(f"Make `{name}` hand out a context manager",
                                             f"`{name}` hands out no factory of one engine"),
                        {}, fixture=True)
    site = sites[0]
    helper = replace(helper, line=fixture.node.lineno)
    title = factory_title(module, factory.name, across=True)
    members = {home.path: home}
    fallback = own_fix(module, site)
    problem = self_use(module, fixture, factory, name)
    groups: list[Callable[[], CallerGroup]] = []
    own_calls = call_sites(module, fixture, name)
    if isinstance(own_calls, str):
        problem = problem or f"in `{shown}`, {own_calls}"
    elif own_calls:
        groups.append(_fixture_planner(home, name, own_calls))
    directory = os.path.join(os.path.dirname(conftest), "")
    needle = name.encode()
    tests_imported = False
    for absolute in files:
        if absolute == conftest or needle not in (source := read(absolute) or b""):
            continue
        other = member(absolute, True)
        if other is None or other.analysis is None:
            continue
        theirs = other.analysis
        where = f"`{tree_path(other.path, root)}`"
        if not absolute.startswith(directory):
            # Pytest hands it a fixture of its own directory: only a test another module
            # imports or inherits may be run under the conftest, where no file imports it.
            asks = next((f for f in theirs.functions if name in f.params), None) \
                if not theirs.private_to_tree else None
            if asks is not None:
                problem = problem or (
                    f"`{asks.name}()` in {where} (line {asks.node.lineno}), outside the "
                    f"conftest's directory, takes a parameter `{name}`: a module under it that "
                    "inherits or imports that test would be handed the fixture, and its calls "
                    "there would get a context manager instead of an engine")
            continue
        if any((found := member(c, True)) is not None and found.analysis is not None and
               found.analysis.top_fixture(name) is not None
               for c in _between(absolute, conftest)):
            continue  # a nearer conftest's fixture of the name is the one its tests get
        own = [f for f in theirs.functions if f.fixture_name == name]
        if own and all(f.parent is None and f.owner_class is None and name not in f.params
                       for f in own):
            continue  # the module's own fixture of the name
        if other.checked:
            members[other.path] = other
        if own:
            problem = problem or (
                f"{where} defines a fixture `{name}` (line {own[0].node.lineno}) in a class "
                "or over the conftest's: which one a test gets is not followed")
            continue
        calls = call_sites(theirs, None, name)
        if isinstance(calls, str):
            problem = problem or f"in {where}, {calls}"
        elif calls and not other.checked:
            problem = problem or (
                f"`{name}` is also called in {where}, a module this run does not check: the "
                "fixture and every call of it are fixed together or not at all")
        elif calls:
            groups.append(_fixture_planner(other, name, calls))
            tests_imported = tests_imported or IMPORTS_TESTS.search(source) is not None

    def unit(fix: FactoryPlan | FixInfo) -> TreeUnit:
        alone = fallback
        if isinstance(fix, FixInfo) and alone is not None and \
                alone.applicability is not Applicability.NONE:
            alone = replace(alone, reason="; ".join(r for r in (alone.reason, (
                f"`{factory.name}()` is not made a context manager with every call of it in "
                f"the tree: {fix.reason}")) if r))
        return TreeUnit(helper, fix, members, True, alone, site.call.lineno)

    if problem is not None:
        return unit(FixInfo.none(title, problem))
    if not groups:
        return unit(FixInfo.none(title, f"no test or fixture calls what `{name}` hands out"))
    return unit(plan_factory_unit(module, factory, site, (group() for group in groups),
                                  tree=root, tests_imported=tests_imported, fixture=name))


def _between(absolute: str, conftest: str) -> list[str]:
    """The conftests pytest loads for the module at ``absolute`` that are nearer to it than
    ``conftest`` (innermost first)."""
    out: list[str] = []
    for found in conftest_files(absolute):
        if found == conftest:
            break
        out.append(found)
    return out


def _fixture_planner(member: Member, name: str, calls: list[ast.Call]
                     ) -> Callable[[], CallerGroup]:
    """Plans the calls ``calls`` of the factory fixture ``name`` in ``member`` when called."""
    assert member.analysis is not None
    analysis = member.analysis
    return lambda: caller_group(analysis, name, calls)


def _analyse(absolute: str, checked: dict[str, str], read: Reader,
             config_of: Callable[[str], Config], conftests: ConftestIndex) -> Member | None:
    """The analysis and violations of the file at ``absolute`` as it now is."""
    source = read(absolute)
    if source is None:
        return None
    path = checked.get(absolute) or _shown(absolute)
    config = config_of(absolute)
    if absolute in checked:
        result = check_module(source, path, config, conftests)
        if result.module is not None:
            return Member(path, source, config, result.module, result.violations)
    tree, text, error = parse_source(source, path)
    if error is not None or tree is None:
        return None
    try:  # a module out of the rules' scope (a helper module) is analysed all the same
        module = ModuleAnalysis.build(tree, text, path, config,
                                      conftest_engine_fixtures(path, config, index=conftests),
                                      summarise=True)
    except RecursionError:
        return None
    return Member(path, source, config, module, [], absolute in checked)


def _shown(absolute: str) -> str:
    """``absolute`` from the working directory when below it, else as it is."""
    relative = os.path.relpath(absolute)
    return absolute if relative.startswith(os.pardir) else relative


def _unit(root: str, helper: ImportedHelper, member: MemberOf, read: Reader,
          files: list[str]) -> TreeUnit:
    """The unit of ``helper`` in the tree at ``root`` whose ``.py`` files are ``files``
    (``member`` analyses a file; only a file whose bytes (``read``) name the helper can
    refer to it, and only those are)."""
    name = helper.name
    home_path = os.path.normpath(os.path.join(root, helper.module))
    home = member(home_path, True)  # its own calls too, planned on its analysis
    if home is None:
        return TreeUnit(helper, FixInfo.none(f"Make `{name}()` a context manager",
                                             f"`{helper.module}` cannot be read or parsed"),
                        {})
    module = home.analysis
    assert module is not None
    title = factory_title(module, name, across=True)
    members = {home.path: home}

    def none(reason: str) -> TreeUnit:
        return TreeUnit(helper, FixInfo.none(title, reason), members)

    # Every module using the helper first: each is a member, whose violations say why the
    # unit has no fix where it has none.
    needle = name.encode()
    found: list[tuple[Member, ModuleUses]] = []
    # A caller importing from ``tests`` already needs the project root on ``sys.path``: the
    # helper's import of vLLM's runner class from ``tests.conftest`` then adds no failure.
    tests_imported = False
    for absolute in files:
        if absolute == home_path or needle not in (source := read(absolute) or b""):
            continue
        other = member(absolute, False)
        if other is None:
            continue
        uses = other.uses_of(helper)
        if uses is not None:
            found.append((other, uses))
            tests_imported = tests_imported or IMPORTS_TESTS.search(source) is not None
            if other.checked:
                members[other.path] = other
    func = next((f for f in module.functions if f.name == name and f.parent is None and
                 f.owner_class is None and f.kind is FunctionKind.HELPER), None)
    sites = [s for s in module.engines if func is not None and s.function is func]
    if func is None or len(sites) != 1:
        return none(f"`{name}()` builds several engines or none the fix can find")
    groups: list[Callable[[], CallerGroup]] = []
    problem: str | None = None
    if any(isinstance(n, ast.Name) and n.id == name for n in walk_breadth(module.tree)):
        own = module_call_sites(module, func)
        if isinstance(own, str):
            problem = own
        elif own:
            groups.append(lambda: next(caller_groups(name, own, tuple_place_of(helper))))
    for other, uses in sorted(found, key=lambda f: tree_path(f[0].path, root)):
        for line, is_call in uses.references:
            where = f"`{tree_path(other.path, root)}` (line {line})"
            if not other.checked:
                problem = problem or (
                    f"`{name}()` is also used in {where}, a module this run does not check: "
                    "the helper and every caller are fixed together or not at all")
            elif not is_call:
                problem = problem or (
                    f"`{name}` is used other than by a call in {where}: what receives it "
                    "would get a context manager instead of an engine")
        if other.checked and problem is None:
            groups.append(_planner(other, uses, helper))
    if problem is not None:
        return none(problem)
    if len(members) == 1 and not groups:
        return none(f"`{name}()` is called nowhere in the tree")
    return TreeUnit(helper, plan_factory_unit(module, func, sites[0],
                                              (group() for group in groups), tree=root,
                                              tests_imported=tests_imported),
                    members)


def _planner(member: Member, uses: ModuleUses, helper: ImportedHelper
             ) -> Callable[[], CallerGroup]:
    """Plans the calls ``uses`` of the factory ``helper`` in ``member`` when called."""
    return lambda: member.group(uses, helper)


def tuple_place_of(helper: ImportedHelper) -> int | None:
    """The engine's index in the tuple ``helper`` returns (kind ``"t"``), else ``None``."""
    return int(helper.extra) if helper.kind == "t" and helper.extra.isdigit() else None


def _references(module: ModuleAnalysis, helper: ImportedHelper
                ) -> list[tuple[ast.AST, ast.Call | None]]:
    """Every expression of ``module`` that refers to ``helper`` as the tree's index
    resolves it, with the call it is the callee of (``None``: a use other than a call)."""
    out = [(node, call) for node, found, call in _helper_references(module)
           if (found.module, found.name) == (helper.module, helper.name)]
    out.sort(key=lambda r: (r[0].lineno, r[0].col_offset))  # type: ignore[attr-defined]
    return out


def _helper_references(module: ModuleAnalysis
                       ) -> Iterator[tuple[ast.AST, ImportedHelper, ast.Call | None]]:
    """Every expression of ``module`` that refers to a helper of another module as the
    tree's index resolves it (breadth first), with the helper and the call it is the callee
    of (``None``: a use other than a call)."""
    if not module.imported_helpers:
        return
    for node in walk_breadth(module.tree):
        if not isinstance(node, (ast.Name, ast.Attribute)) or \
                not isinstance(node.ctx, ast.Load):
            continue
        found = module.helper_called(ast.Call(func=node, args=[], keywords=[]))
        if found is None:
            continue
        parent = module.parent(node)
        yield node, found, parent if isinstance(parent, ast.Call) and parent.func is node \
            else None


def unit_sources(unit: TreeUnit) -> dict[str, bytes] | str:
    """The new bytes of every module of ``unit`` that its fix changes, by path; or why the
    rewrite failed (a codemod's error, or a text that does not parse): then none of them
    is to be written."""
    from lint_gpu_tests.codemods.driver import apply_fixes  # imports libcst

    plan = unit.fix
    # A conftest's factory fixture whose unit has no fix: the fixture's own fix, alone.
    carried = plan.fix_info() if isinstance(plan, FactoryPlan) else unit.fallback
    assert carried is not None
    members = unit.members if isinstance(plan, FactoryPlan) else \
        dict(list(unit.members.items())[:1])
    out: dict[str, bytes] = {}
    for path, member in members.items():
        assert member.analysis is not None, "a unit is rewritten from its modules' analyses"
        carrier = Violation("GPU001", "engine-outside-runner", "", path,
                            Location(unit.fallback_line or 1, 1),
                            Location(unit.fallback_line or 1, 1), carried)
        try:
            applied = apply_fixes(member.source, path, member.config, [carrier],
                                  member.analysis)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - the unit is left whole, reported
            return f"the fix of `{unit.helper.name}()` failed in `{path}`: {exc}"
        if applied is None or applied.source == member.source:
            return f"the fix of `{unit.helper.name}()` changed nothing in `{path}`"
        if parse_source(applied.source, path)[2] is not None:
            return (f"the fix of `{unit.helper.name}()` produced invalid code in `{path}`; "
                    "no file of the unit was written")
        out[path] = applied.source
    return out
