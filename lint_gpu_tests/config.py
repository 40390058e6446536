"""Configuration: ``[tool.gpu-test-lint]`` in ``pyproject.toml`` or ``.gpu-test-lint.toml``.

Keys are spelled as ruff spells its own (kebab-case). Unknown keys are an error that
names the key. Each file gets the settings of the nearest config file walking up from its
directory (as ruff and flake8 resolve theirs): a ``.gpu-test-lint.toml``, or a
``pyproject.toml`` that has a ``[tool.gpu-test-lint]`` table; ``--config`` overrides them all.
Relative patterns (``exclude``, ``extend-exclude``, ``per-file-ignores``, ``test-roots``) and
the ``baseline`` path are anchored at the directory of the file that sets them.
:class:`ConfigResolver` does this.
"""

from __future__ import annotations

import configparser
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

DEFAULT_ENGINE_CLASSES = ("vllm.LLM",)
#: Where vLLM defines what it re-exports: a name imported from the defining module is the
#: same class as the public one (vllm/__init__.py re-exports vllm/entrypoints/llm.py's LLM).
REEXPORTS = {"vllm.entrypoints.llm.LLM": "vllm.LLM", "vllm.entrypoints.LLM": "vllm.LLM"}
DEFAULT_ISOLATION_DECORATORS = (
    "create_new_process_for_each_test",
    "fork_new_process_for_each_test",
    "spawn_new_process_for_each_test",
    "forked",  # pytest-forked's ``@pytest.mark.forked``: the test item runs in a forked child
)
#: Calls that start a process running a function of the test module (its ``target=``, its
#: first argument, or what is passed to the ``submit``/``map``/``Process``/``apply_async``
#: ... methods of what they return): the Python and PyTorch process APIs.
DEFAULT_PROCESS_LAUNCHERS = (
    "multiprocessing.Process",
    "multiprocessing.Pool",
    "multiprocessing.get_context",
    "multiprocessing.pool.Pool",
    "torch.multiprocessing.Process",
    "torch.multiprocessing.Pool",
    "torch.multiprocessing.get_context",
    "torch.multiprocessing.spawn",
    "torch.multiprocessing.start_processes",
    "concurrent.futures.ProcessPoolExecutor",
    "concurrent.futures.process.ProcessPoolExecutor",
)
TARGETS = ("bundled", "vllm")
#: What the project's own runner (``runner``) gives its ``with``: an object holding the
#: engine at ``runner-attribute``, or the engine itself.
RUNNER_YIELDS = ("runner", "engine")
#: The module part of ``runner = "conftest:NAME"``: a fixture, requested rather than imported.
FIXTURE_RUNNER_MODULE = "conftest"
#: How GPU001/GPU004 fixes manage an engine (README, "Fix strategies"): ``runner`` wraps
#: its live range in the runner's with-block, ``isolate`` runs the test in a new process.
FIX_STRATEGIES = ("runner", "isolate")
SELECTOR_KEYS = ("select", "ignore", "extend-select")
#: vLLM's default ``gpu_memory_utilization`` (vllm/config/cache.py ``CacheConfig``, and the
#: keyword default of ``vllm.LLM.__init__``, 0.92 in vLLM 0.32).
DEFAULT_ENGINE_MEMORY_SHARE = 0.92
#: Environment variables GPU008 treats as engine configuration (``fnmatch`` patterns): the
#: families vLLM, torch, Hugging Face and the collective libraries read (``VLLM_*``,
#: ``CUDA_*``, ``HF_*``, ``TRANSFORMERS_*``, ``TOKENIZERS_*``, ``TORCH_*``, ``PYTORCH_*``,
#: ``NCCL_*``, ``OMP_*``, ``HCCL_*``), and the device visibility variables of every
#: platform vLLM supports, as each platform's ``device_control_env_var`` and Ray's
#: ``RAY_EXPERIMENTAL_NOSET_*`` list name them: CUDA and ROCm ``CUDA_VISIBLE_DEVICES``
#: (vllm/platforms/cuda.py, rocm.py, which also lists ``HIP_VISIBLE_DEVICES`` and
#: ``ROCR_VISIBLE_DEVICES``); Intel XPU ``ZE_AFFINITY_MASK`` (vllm/platforms/xpu.py) and
#: ``ONEAPI_DEVICE_SELECTOR``; TPU ``TPU_VISIBLE_CHIPS`` with ``TPU_CHIPS_PER_HOST_BOUNDS``,
#: ``TPU_HOST_BOUNDS`` (vllm/platforms/tpu.py: ``TPU_*``); Neuron ``NEURON_RT_VISIBLE_CORES``
#: (vllm/platforms/neuron.py); Gaudi HPU ``HABANA_VISIBLE_MODULES`` (vllm-gaudi's
#: vllm_gaudi/platform.py) and ``HABANA_VISIBLE_DEVICES``; Ascend NPU
#: ``ASCEND_RT_VISIBLE_DEVICES`` (vllm-ascend's vllm_ascend/platform.py), whose collective
#: library reads ``HCCL_*``.
DEFAULT_ENVIRONMENT_VARIABLES = (
    "VLLM_*", "CUDA_*", "HF_*", "TRANSFORMERS_*", "TOKENIZERS_*", "TORCH_*", "PYTORCH_*",
    "NCCL_*", "OMP_*", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
    "ONEAPI_DEVICE_SELECTOR", "TPU_*", "NEURON_RT_VISIBLE_CORES", "HABANA_VISIBLE_*",
    "HCCL_*", "ASCEND_RT_VISIBLE_DEVICES",
)
#: The line length a fix wraps at when neither this tool, ruff nor black sets one (theirs).
DEFAULT_LINE_LENGTH = 88
#: :attr:`Config.python_floor` of a config no :class:`ConfigResolver` has filled in (a
#: library caller's own, or one read by :func:`load_config_file`): a fix looks the oldest
#: Python up itself (:func:`oldest_python`).
UNRESOLVED_FLOOR = (0, 0)


class ConfigError(Exception):
    """A configuration file is unreadable, malformed, or has an unknown key or bad value."""


@dataclass(frozen=True)
class Config:
    """Resolved settings for one run.

    Attributes:
        select: code prefixes to report (``"GPU"`` = all rules).
        ignore: code prefixes never reported.
        extend_select: prefixes added to ``select``.
        per_file_ignores: gitignore-style pattern -> code prefixes ignored in matching files.
        exclude: gitignore-style patterns replacing the default excludes.
        extend_exclude: patterns added to ``exclude``.
        target: which runner fixes target, ``"bundled"`` or ``"vllm"`` (README, "Fix safety").
        runner: the project's own runner fixes target instead of the bundled one (README,
            "Your own runner"): ``"pkg.module:name"``, a context-manager function or class
            imported from a module of the project, or ``"conftest:name"``, a fixture of a
            conftest.py pytest loads, requested as a parameter; ``""``: the target's runner.
            Setting it puts ``name`` first in ``runner_classes`` (module form) or makes it
            ``runner_fixture`` (fixture form).
        runner_yields: what that runner's ``with`` gives: ``"runner"`` (the engine is its
            ``runner_attribute``) or ``"engine"``.
        fix_strategy: ``"runner"`` (wrap in the runner's with-block) or ``"isolate"``
            (decorate the test with ``create_new_process_for_each_test("spawn")``).
        engine_classes: qualified names of engine classes (default ``vllm.LLM``).
        runner_fixture: name of the runner fixture (default ``vllm_runner``).
        runner_classes: names of runner classes (default ``VllmRunner``); a class deriving
            from one, in the module or in a ``conftest.py`` pytest loads for it
            (``DPVllmRunner(VllmRunner)``), is a runner class too.
        runner_attribute: attribute of a runner holding the engine (``llm``; ``model`` in
            older copies such as vllm-ascend's).
        isolation_decorators: decorator names whose tests run in their own process (by
            last name; a pytest mark among them, ``forked``, also counts from a class's
            decorators or ``pytestmark`` and from the module's ``pytestmark``).
        process_launchers: qualified names of the calls that run a function in a new
            process (``multiprocessing.Process``, ``torch.multiprocessing.spawn``, ...):
            that function counts as isolated.
        cleanup_functions: extra call names GPU004 treats as manual cleanup.
        test_roots: directories whose ``*.py`` files count as test modules.
        engine_memory_share: the ``gpu_memory_utilization`` GPU007 assumes for an engine that
            does not set it (a fraction of the device, 0 < share <= 1).
        environment_variables: case-sensitive ``fnmatch`` patterns of the environment
            variables GPU008 treats as engine configuration (replaces the defaults).
        extend_environment_variables: patterns added to ``environment_variables``.
        line_length: the width fixes wrap at (a signature made longer by an added fixture, a
            with-header): ``line-length`` here, else the project's ruff or black setting
            (:func:`formatter_line_length`), else 88.
        line_length_source: where ``line_length`` comes from (``""``: the default).
        python_floor: the oldest Python the project declares (:func:`oldest_python` of the
            file's directory; ``None`` when it declares none): a fix writes no syntax it
            lacks (``with (a, b):`` needs 3.9). Filled in per directory by
            :class:`ConfigResolver`; :data:`UNRESOLVED_FLOOR` where nothing filled it in.
        baseline: the absolute path of the baseline file (``baseline``, relative to the
            config file; ``--baseline``), ``""`` for none: violations recorded there are
            not reported (:mod:`lint_gpu_tests.report.baseline`). It shapes no file's results, so
            the cache ignores it.
        root: directory the config was found in (for relative patterns).
        source: the config file these settings come from (``""`` for the defaults).
    """

    select: tuple[str, ...] = ("GPU",)
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    target: str = "bundled"
    runner: str = ""
    runner_yields: str = "runner"
    fix_strategy: str = "runner"
    engine_classes: tuple[str, ...] = DEFAULT_ENGINE_CLASSES
    runner_fixture: str = "vllm_runner"
    runner_classes: tuple[str, ...] = ("VllmRunner",)
    runner_attribute: str = "llm"
    isolation_decorators: tuple[str, ...] = DEFAULT_ISOLATION_DECORATORS
    process_launchers: tuple[str, ...] = DEFAULT_PROCESS_LAUNCHERS
    cleanup_functions: tuple[str, ...] = ()
    test_roots: tuple[str, ...] = ()
    engine_memory_share: float = DEFAULT_ENGINE_MEMORY_SHARE
    environment_variables: tuple[str, ...] = DEFAULT_ENVIRONMENT_VARIABLES
    extend_environment_variables: tuple[str, ...] = ()
    line_length: int = DEFAULT_LINE_LENGTH
    line_length_source: str = field(default="", compare=False)
    python_floor: tuple[int, int] | None = UNRESOLVED_FLOOR
    baseline: str = ""
    root: str = field(default=".", compare=False)
    source: str = field(default="", compare=False)

    @property
    def environment_patterns(self) -> tuple[str, ...]:
        """The patterns GPU008 matches: ``environment-variables`` and their extension."""
        return self.environment_variables + self.extend_environment_variables

    @property
    def runner_module(self) -> tuple[str, str] | None:
        """``(module, name)`` of a ``runner = "pkg.module:name"`` the fixes import, else
        ``None`` (the bundled or vLLM runner, or a fixture)."""
        module, _, name = self.runner.partition(":")
        return (module, name) if name and module != FIXTURE_RUNNER_MODULE else None

    @property
    def runner_named(self) -> str:
        """The runner messages name (``with NAME(...)``): the project's own runner of
        ``runner = "pkg.module:name"``, as it is called, else the runner fixture
        (``runner-fixture``, or the ``NAME`` of ``runner = "conftest:NAME"``)."""
        return self.runner_classes[0] if self.runner_module is not None and \
            self.runner_classes else self.runner_fixture

    @property
    def runner_is_fixture(self) -> bool:
        """Whether the fixes request the runner as a fixture everywhere, helpers included
        (through their callers): ``target = "vllm"`` or ``runner = "conftest:NAME"``."""
        return self.target == "vllm" or self.runner.startswith(FIXTURE_RUNNER_MODULE + ":")

    @property
    def engine_at(self) -> str:
        """What follows the name the runner's ``with`` binds to reach the engine:
        ``".llm"`` (``runner-attribute``), or ``""`` when the runner yields the engine."""
        return "" if self.runner_yields == "engine" else "." + self.runner_attribute

    def is_code_enabled(self, code: str) -> bool:
        """Return True when ``code`` is selected and not ignored (longest prefix wins, as ruff).
        The code of a rule from outside the package (:data:`lint_gpu_tests.codes.OPT_IN_CODES`)
        is selected only by a selector that names it in full."""
        selectors = self.select + self.extend_select
        # Not imported here (a warm run never needs it): unimported, nothing was registered.
        codes = sys.modules.get("lint_gpu_tests.codes")
        if codes is not None and code in codes.OPT_IN_CODES:  # tests swap the table
            selectors = tuple(p for p in selectors if p == code)
        best_sel = max((len(p) for p in selectors if code.startswith(p)), default=-1)
        best_ign = max((len(p) for p in self.ignore if code.startswith(p)), default=-1)
        return best_sel >= 0 and best_sel > best_ign

    def fingerprint(self) -> str:
        """Stable hash of every setting that changes results (for the cache), the root
        included (relative patterns are anchored there). The line length and the oldest
        Python shape only what a fix writes, which the cache does not keep: they are left
        out, so a ``check`` (which does not look them up) and a ``check --fix`` share the
        cache; so is the baseline, which filters a run's results after the check."""
        data = dataclasses.asdict(self)
        data["root"] = os.path.abspath(self.root)
        if not self.runner:  # the settings of a run without one hash as they always did
            del data["runner"], data["runner_yields"]
        elif self.runner_module is not None:  # its signature decides the fixes
            parts = self.runner_module[0].split(".")
            data["runner_source"] = [_file_digest(os.path.join(self.root, *parts) + ".py"),
                                     _file_digest(os.path.join(self.root, *parts,
                                                               "__init__.py"))]
        for name in ("source", "line_length", "line_length_source", "python_floor",
                     "baseline"):
            data.pop(name, None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def with_overrides(self, **changes: Any) -> Config:
        """Return a copy with the given fields replaced (CLI flags win over files)."""
        return dataclasses.replace(self, **changes)


_LIST_KEYS = {
    "select": "select",
    "ignore": "ignore",
    "extend-select": "extend_select",
    "exclude": "exclude",
    "extend-exclude": "extend_exclude",
    "engine-classes": "engine_classes",
    "runner-classes": "runner_classes",
    "isolation-decorators": "isolation_decorators",
    "process-launchers": "process_launchers",
    "cleanup-functions": "cleanup_functions",
    "test-roots": "test_roots",
    "environment-variables": "environment_variables",
    "extend-environment-variables": "extend_environment_variables",
}
_STR_KEYS = {
    "target": "target",
    "runner": "runner",
    "runner-yields": "runner_yields",
    "fix-strategy": "fix_strategy",
    "runner-fixture": "runner_fixture",
    "runner-attribute": "runner_attribute",
}
_SHARE_KEYS = {"engine-memory-share": "engine_memory_share"}
KNOWN_KEYS = frozenset(_LIST_KEYS) | frozenset(_STR_KEYS) | frozenset(_SHARE_KEYS) | {
    "per-file-ignores", "line-length", "baseline"}
#: The widths ruff accepts for ``line-length`` (black sets no bound; the same are taken).
_LINE_LENGTH_RANGE = range(1, 321)


def known_codes() -> tuple[str, ...]:
    """Every code the checker can report: the rules' codes and ``GPU900`` (parse error)."""
    from lint_gpu_tests.codes import PARSE_ERROR_CODE, RULE_CODES

    return (*RULE_CODES, PARSE_ERROR_CODE)


def selector_problem(selector: str) -> str | None:
    """Why ``selector`` (a code or code prefix such as ``GPU00``) selects nothing, or
    ``None`` when it names at least one known code. ``ALL`` selects everything."""
    known = known_codes()
    if selector.upper() == "ALL" or any(code.startswith(selector.upper()) for code in known):
        return None
    import difflib  # only for a bad selector

    close = difflib.get_close_matches(selector.upper(), known, n=1, cutoff=0.85)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    return f"`{selector}` is not a rule code or prefix{hint}"


def command_line_overrides(selections: Mapping[str, Sequence[str]],
                           patterns: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """The overrides of a :class:`ConfigResolver` from command-line options given as
    comma-separated lists (each option may repeat): ``selections`` by setting name
    (``select``: codes or prefixes, upper-cased, ``ALL`` as ``GPU``), ``patterns``
    (``exclude``: gitignore-style patterns). Options not given (empty) are left out.

    Raises:
        ConfigError: ``invalid value for `--select`: ...`` when a selector selects nothing.
    """
    out: dict[str, tuple[str, ...]] = {}
    for key, values in selections.items():
        codes = [item.strip().upper() for value in values for item in value.split(",")]
        for code in filter(None, codes):
            problem = selector_problem(code)
            if problem is not None:
                raise ConfigError(f"invalid value for `--{key.replace('_', '-')}`: {problem}")
        if values:
            out[key] = tuple("GPU" if c == "ALL" else c for c in codes if c)
    for key, values in patterns.items():
        if values:
            out[key] = tuple(p.strip() for v in values for p in v.split(",") if p.strip())
    return out


def _selectors(key: str, value: object, source: str) -> tuple[str, ...]:
    codes = _str_list(key, value, source)
    for code in codes:
        problem = selector_problem(code)
        if problem is not None:
            raise ConfigError(f"{source}: `{key}`: {problem}")
    return tuple("GPU" if c.upper() == "ALL" else c.upper() for c in codes)


def _str_list(key: str, value: object, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{source}: `{key}` must be a list of strings")
    return tuple(value)


#: List keys whose entries are qualified names (``module.name``).
_QUALIFIED_KEYS = frozenset({"process-launchers"})


def _qualified_names(key: str, value: object, source: str) -> tuple[str, ...]:
    names = _str_list(key, value, source)
    for name in names:
        parts = name.split(".")
        if len(parts) < 2 or not all(part.isidentifier() for part in parts):
            raise ConfigError(f"{source}: `{key}`: `{name}` is not a qualified name "
                              "(`module.name`, e.g. `multiprocessing.Process`)")
    return names


def _line_length(value: object, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or \
            value not in _LINE_LENGTH_RANGE:
        raise ConfigError(f"{source}: `line-length` must be an integer from 1 to 320")
    return value


def config_from_table(table: Mapping[str, object], source: str, root: str = ".",
                      where: str = "in [tool.gpu-test-lint]") -> Config:
    """Build a :class:`Config` from a parsed ``[tool.gpu-test-lint]`` table.

    Args:
        table: the table's keys and values, as ``tomllib`` returns them.
        source: file name used in error messages.
        root: directory that relative patterns are anchored to.
        where: where the table is, for error messages (``"in [tool.gpu-test-lint]"``, or
            ``"at the top level"`` of a ``.gpu-test-lint.toml`` or ``--config`` file).

    Raises:
        ConfigError: for an unknown key (named in the message) or a value of the wrong type.
    """
    kwargs: dict[str, Any] = {"root": root, "source": source}
    for key, value in table.items():
        if key in SELECTOR_KEYS:
            kwargs[_LIST_KEYS[key]] = _selectors(key, value, source)
        elif key in _QUALIFIED_KEYS:
            kwargs[_LIST_KEYS[key]] = _qualified_names(key, value, source)
        elif key in _LIST_KEYS:
            kwargs[_LIST_KEYS[key]] = _str_list(key, value, source)
        elif key in _STR_KEYS:
            if not isinstance(value, str):
                raise ConfigError(f"{source}: `{key}` must be a string")
            kwargs[_STR_KEYS[key]] = value
        elif key in _SHARE_KEYS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    0 < value <= 1):
                raise ConfigError(f"{source}: `{key}` must be a number in (0, 1]")
            kwargs[_SHARE_KEYS[key]] = float(value)
        elif key == "baseline":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{source}: `baseline` must be a path (a non-empty string)")
            kwargs["baseline"] = os.path.normpath(os.path.join(os.path.abspath(root), value))
        elif key == "line-length":
            kwargs["line_length"] = _line_length(value, source)
            kwargs["line_length_source"] = f"{source} [tool.gpu-test-lint]"
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: `per-file-ignores` must be a table")
            kwargs["per_file_ignores"] = tuple(
                (pattern, _selectors(f"per-file-ignores.{pattern}", codes, source))
                for pattern, codes in value.items()
            )
        else:
            import difflib  # only for an unknown key

            close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            if isinstance(value, dict):  # `[lint]`, `[tool.ruff]`...: a table, not a key
                raise ConfigError(f"{source}: unknown table `[{key}]` {where}{hint}")
            raise ConfigError(f"{source}: unknown key `{key}` {where}{hint}")
    if kwargs.get("target", "bundled") not in TARGETS:
        raise ConfigError(
            f"{source}: `target` must be one of {', '.join(TARGETS)}, got {kwargs['target']!r}"
        )
    if "runner" in kwargs:
        _project_runner(kwargs, source)
    if kwargs.get("runner_yields", "runner") not in RUNNER_YIELDS:
        raise ConfigError(f"{source}: `runner-yields` must be one of "
                          f"{', '.join(RUNNER_YIELDS)}, got {kwargs['runner_yields']!r}")
    if kwargs.get("fix_strategy", "runner") not in FIX_STRATEGIES:
        raise ConfigError(
            f"{source}: `fix-strategy` must be one of {', '.join(FIX_STRATEGIES)}, "
            f"got {kwargs['fix_strategy']!r}"
        )
    return Config(**kwargs)


def _project_runner(kwargs: dict[str, Any], source: str) -> None:
    """Check ``runner`` (``pkg.module:name`` or ``conftest:name``) and make its name the
    first runner class (module form) or the runner fixture (fixture form).

    Raises:
        ConfigError: a malformed value, or ``runner`` with ``target = "vllm"``.
    """
    value = kwargs["runner"]
    module, _, name = value.partition(":")
    if not (name.isidentifier() and module and all(p.isidentifier() for p in module.split("."))):
        raise ConfigError(f"{source}: `runner` must be `package.module:name` (a context "
                          "manager of the project) or `conftest:name` (a fixture), got "
                          f"{value!r}")
    if kwargs.get("target", "bundled") != "bundled":
        raise ConfigError(f"{source}: `runner` names the project's own runner, and "
                          "`target` names another: set one of them")
    if module == FIXTURE_RUNNER_MODULE:
        kwargs["runner_fixture"] = name
    else:
        classes = kwargs.get("runner_classes", Config.runner_classes)
        kwargs["runner_classes"] = (name, *(c for c in classes if c != name))


def _file_digest(path: str) -> str:
    """The SHA-256 of the file at ``path`` (``""`` for one that cannot be read)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _tomllib() -> ModuleType:
    """The TOML reader, imported when a config file is read (a run without one skips it)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib


def load_config_file(path: Path) -> Config:
    """Load settings from ``path`` (a ``pyproject.toml`` or ``.gpu-test-lint.toml``).

    In ``pyproject.toml`` the settings live under ``[tool.gpu-test-lint]``; in
    ``.gpu-test-lint.toml`` at the top level (a ``[tool.gpu-test-lint]`` table is accepted too).

    Raises:
        ConfigError: when the file cannot be read or parsed, or has a bad key or value.
    """
    tomllib = _tomllib()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    tool = data.get("tool", {})
    where = "in [tool.gpu-test-lint]"
    if path.name == "pyproject.toml":
        table = tool.get("gpu-test-lint", {}) if isinstance(tool, dict) else {}
    elif isinstance(tool, dict) and "gpu-test-lint" in tool:
        table = tool["gpu-test-lint"]
    else:
        table, where = data, "at the top level"
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.gpu-test-lint] must be a table")
    return config_from_table(table, str(path), root=os.path.abspath(path.parent), where=where)


def _has_table(pyproject: Path) -> bool:
    """Whether ``pyproject`` has a ``[tool.gpu-test-lint]`` table.

    Raises:
        ConfigError: when the file names the tool but is not valid TOML.
    """
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if "gpu-test-lint" not in text:
        return False
    tomllib = _tomllib()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject}: invalid TOML: {exc}") from exc
    tool = data.get("tool")
    return isinstance(tool, dict) and "gpu-test-lint" in tool


def _toml_line_length(path: str, tables: Sequence[str]) -> int | None:
    """The ``line-length`` that the TOML file at ``path`` sets in the first of ``tables``
    (dotted names; ``""`` is the top level) that sets one, or ``None``: no such file, no
    such key, or a file or value ruff would reject (that is ruff's error to report)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    if "line-length" not in text:
        return None
    tomllib = _tomllib()
    try:
        data: object = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    for dotted in tables:
        table = data
        for part in dotted.split(".") if dotted else ():
            table = table.get(part) if isinstance(table, dict) else None
        value = table.get("line-length") if isinstance(table, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and \
                value in _LINE_LENGTH_RANGE:
            return value
    return None


def formatter_line_length(directory: str | os.PathLike[str]) -> tuple[int, str] | None:
    """The line length the formatter configured in ``directory`` itself wraps at, and where
    it is set: ruff's (``.ruff.toml``, ``ruff.toml``, ``[tool.ruff]`` of ``pyproject.toml``,
    in ruff's order), else black's (``[tool.black]``); ``None`` when none sets one here.
    ``line-length`` is read as written: ruff's ``extend`` is not followed."""
    for name, tables in ((".ruff.toml", ("",)), ("ruff.toml", ("",)),
                         ("pyproject.toml", ("tool.ruff", "tool.black"))):
        path = os.path.join(directory, name)
        for table in tables:
            found = _toml_line_length(path, (table,))
            if found is not None:
                where = f" [{table}]" if table else ""
                return found, f"{path}{where}"
    return None


def _toml_data(path: str, needle: str) -> dict[str, Any] | None:
    """The TOML file at ``path`` parsed, when it mentions ``needle``; ``None`` when there is
    no such file, it does not, or it is no valid TOML."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    if needle not in text:
        return None
    tomllib = _tomllib()
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    return data


def _python_version(value: object) -> tuple[int, int] | None:
    """``(3, N)`` of ruff's ``target-version`` (``"py39"``) or of the lower bound of a
    ``requires-python`` specifier (``">=3.9,<3.13"``, ``"~=3.10"``, ``"==3.11.*"``)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.startswith("py") and text[2:].isdigit() and len(text) > 3:
        return int(text[2]), int(text[3:])
    for clause in text.split(","):
        clause = clause.strip()
        for op in (">=", "~=", "==", ">"):
            if clause.startswith(op):
                parts = clause[len(op):].strip().split(".")
                if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                    return int(parts[0]), int(parts[1]) + (op == ">" and len(parts) == 2)
    return None


def oldest_python(directory: str | os.PathLike[str],
                  memo: dict[str, tuple[int, int] | None] | None = None
                  ) -> tuple[int, int] | None:
    """The oldest Python the project of ``directory`` declares, as ruff infers it: the
    nearest ``target-version`` of ruff's settings (``.ruff.toml``, ``ruff.toml``,
    ``[tool.ruff]``), else ``[project] requires-python``, walking up; ``None`` when none
    says. ``memo`` (absolute directory -> its answer) keeps the answers of every directory
    walked, so a later walk stops at the first directory already known."""
    here = os.path.abspath(directory)
    walked: list[str] = []
    found: tuple[int, int] | None = None
    while memo is None or here not in memo:
        walked.append(here)
        found = _declared_python(here)
        parent = os.path.dirname(here)
        if found is not None or parent == here:
            break
        here = parent
    else:
        found = memo[here]
    if memo is not None:
        memo.update(dict.fromkeys(walked, found))
    return found


def _declared_python(directory: str) -> tuple[int, int] | None:
    """The oldest Python the files of ``directory`` itself declare (see
    :func:`oldest_python`), or ``None``."""
    for name, table in ((".ruff.toml", ""), ("ruff.toml", ""),
                        ("pyproject.toml", "tool.ruff"), ("pyproject.toml", "project")):
        key = "requires-python" if table == "project" else "target-version"
        data: object = _toml_data(os.path.join(directory, name), key)
        for part in table.split(".") if table else ():
            data = data.get(part) if isinstance(data, dict) else None
        found = _python_version(data.get(key)) if isinstance(data, dict) else None
        if found is not None:
            return found
    return None


#: Files that mark a project's root directory (as pytest's rootdir search looks for them).
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "tox.ini", "pytest.ini", ".git")


def project_module(path: str, config: Config, dotted: str) -> str | None:
    """Where the project of the module at ``path`` holds the module ``dotted``
    (``tests.utils``: ``tests/utils.py`` or ``tests/utils/__init__.py``), looked for in
    ``config.root`` and in every directory from ``path``'s up to the project root (the
    first holding one of :data:`ROOT_MARKERS`); ``None`` when none holds it. A ``path``
    that is no file on disk (a check of text alone) answers ``path`` itself: nothing can
    be looked up, and the module is taken to be there."""
    if not os.path.isfile(path):
        return path
    parts = dotted.split(".")
    candidates = [os.path.join(*parts) + ".py", os.path.join(*parts, "__init__.py")]
    directory = os.path.dirname(os.path.abspath(path))
    directories = [os.path.abspath(config.root)]
    while True:
        directories.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory or any(os.path.exists(os.path.join(directory, m))
                                      for m in ROOT_MARKERS):
            break
        directory = parent
    for base in directories:
        for candidate in candidates:
            if os.path.isfile(os.path.join(base, candidate)):
                return os.path.join(base, candidate)
    return None


def pytest_pythonpath(root: str) -> list[str]:
    """The entries of the ``pythonpath`` setting of pytest in ``root``, read from the one
    settings file pytest takes there, in its order: pytest.ini or .pytest.ini (always),
    pyproject.toml (with ``[tool.pytest.ini_options]``), tox.ini (with ``[pytest]``),
    setup.cfg (with ``[tool:pytest]``); empty where none is read or it sets none."""
    for name in ("pytest.ini", ".pytest.ini"):
        if os.path.isfile(os.path.join(root, name)):
            return _ini_pythonpath(os.path.join(root, name), "pytest") or []
    tomllib = _tomllib()
    try:
        with open(os.path.join(root, "pyproject.toml"), "rb") as f:
            options = tomllib.load(f).get("tool", {}).get("pytest", {}).get("ini_options")
        if isinstance(options, dict):
            value = options.get("pythonpath", [])
            return [value] if isinstance(value, str) else \
                [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
    except (OSError, AttributeError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        pass
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        found = _ini_pythonpath(os.path.join(root, name), section)
        if found is not None:
            return found
    return []


def _ini_pythonpath(path: str, section: str) -> list[str] | None:
    """The ``pythonpath`` entries of ``section`` of the INI file at ``path``; ``None`` where
    the file or the section is missing (or unreadable)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        if not parser.read(path, encoding="utf-8") or not parser.has_section(section):
            return None
    except (configparser.Error, UnicodeDecodeError):
        return None
    return parser.get(section, "pythonpath", fallback="").split()


def baselines_in_force(paths: Iterable[str], config: ConfigResolver,
                       cwd: str | None = None) -> dict[str, list[str]]:
    """The baseline files in force for ``paths`` (files as a run names them, relative to
    ``cwd``, default the working directory): each file's (absolute, normalised) -> the paths
    of ``paths`` whose settings name it, in their order; empty when none names one."""
    base = os.path.abspath(cwd or os.getcwd())
    governed: dict[str, list[str]] = {}
    for path in dict.fromkeys(paths):
        chosen = config.for_file(os.path.join(base, path)).baseline
        if chosen:  # a library caller's relative path is relative to ``cwd``
            governed.setdefault(os.path.normpath(os.path.join(base, chosen)), []).append(path)
    return governed


def config_file_in(directory: str | os.PathLike[str]) -> Path | None:
    """The config file of ``directory`` itself: ``.gpu-test-lint.toml``, else a
    ``pyproject.toml`` with a ``[tool.gpu-test-lint]`` table, else ``None``.

    Raises:
        ConfigError: as :func:`_has_table`.
    """
    dedicated = os.path.join(directory, ".gpu-test-lint.toml")  # os.path: once per directory
    if os.path.isfile(dedicated):
        return Path(dedicated)
    pyproject = os.path.join(directory, "pyproject.toml")
    if os.path.isfile(pyproject) and _has_table(Path(pyproject)):
        return Path(pyproject)
    return None


def find_config_file(start: Path) -> Path | None:
    """Walk up from ``start`` (a file's directory, or the directory itself) to the first
    ``.gpu-test-lint.toml``, or ``pyproject.toml`` holding ``[tool.gpu-test-lint]``; return it
    or ``None``.

    Raises:
        ConfigError: as :func:`_has_table`.
    """
    here = Path(os.path.abspath(start))
    if here.is_file() or not here.exists():
        here = here.parent
    for directory in (here, *here.parents):
        found = config_file_in(directory)
        if found is not None:
            return found
    return None


def resolve_config(paths: Sequence[str], config_file: str | None = None) -> Config:
    """Return one config for ``paths``: ``config_file`` if given, else the one found by
    walking up from the first path (or the working directory), else defaults anchored at the
    working directory. A run over many files resolves per file: :class:`ConfigResolver`.

    Raises:
        ConfigError: as :func:`load_config_file`.
    """
    if config_file is not None:
        return load_config_file(Path(config_file))
    start = Path(paths[0]) if paths else Path.cwd()
    found = find_config_file(start)
    return load_config_file(found) if found else Config(root=str(Path.cwd()))


def config_as_toml(config: Config) -> str:
    """``config`` as the ``[tool.gpu-test-lint]`` table that would give it, every key spelled
    out (``--show-settings``); ``runner`` and ``runner-yields`` only when ``runner`` is set."""
    def value(item: object) -> str:
        if isinstance(item, tuple):
            return "[" + ", ".join(value(x) for x in item) + "]"
        return json.dumps(item)

    keys = [("select", "select"), ("ignore", "ignore"), ("extend-select", "extend_select")]
    out = ["[tool.gpu-test-lint]"]
    origin = config.line_length_source or "the default"
    out.append(f"line-length = {config.line_length}  # from {origin}")
    out += [f"{key} = {value(getattr(config, name))}" for key, name in keys]
    table = ", ".join(f"{json.dumps(p)} = {value(c)}" for p, c in config.per_file_ignores)
    out.append(f"per-file-ignores = {{{' ' + table + ' ' if table else ''}}}")
    names = {**{k: v for k, v in _LIST_KEYS.items() if k not in SELECTOR_KEYS}, **_STR_KEYS,
             **_SHARE_KEYS}
    out += [f"{key} = {value(getattr(config, name))}" for key, name in names.items()
            if config.runner or key not in ("runner", "runner-yields")]
    out.append(f"baseline = {value(config.baseline)}")
    return "\n".join(out) + "\n"


EXTENDING_FIELDS = ("extend_select", "extend_exclude")
"""Override fields that add to a config's own value instead of replacing it."""


def apply_overrides(config: Config, overrides: Mapping[str, Any]) -> Config:
    """``config`` with command-line ``overrides`` (field name -> value) applied: fields in
    :data:`EXTENDING_FIELDS` are appended to the config's own, the others replace them."""
    if not overrides:
        return config
    changes = {key: (getattr(config, key) + tuple(value) if key in EXTENDING_FIELDS else value)
               for key, value in overrides.items()}
    return config.with_overrides(**changes)


class ConfigResolver:
    """Settings per file: the nearest config file walking up from the file's directory, with
    the command line's overrides on top; or one fixed config for every file. A config file
    that does not set ``line-length`` gets the nearest ruff or black setting walking up from
    the file's directory (:func:`formatter_line_length`), else 88; every config gets the
    oldest Python declared walking up from there (:attr:`Config.python_floor`).

    Args:
        config_file: ``--config``: this file's settings for every file.
        overrides: :class:`Config` field -> value from the command line (see
            :func:`apply_overrides`).
        fixed: a ready :class:`Config` for every file (library callers), taken as it is.
        cwd: directory the defaults are anchored at when no config file is found
            (default: the working directory).
        fix_settings: look up beside the files what only fixes use (the formatter's line
            length, the oldest Python); a run that fixes nothing (a plain ``check``, the
            flake8 plugin) passes ``False`` and saves those lookups. :meth:`want_fix_settings`
            turns it on.

    Raises:
        ConfigError: (from the constructor, with ``config_file``) as :func:`load_config_file`.
    """

    def __init__(self, config_file: str | None = None,
                 overrides: Mapping[str, Any] | None = None, *, fixed: Config | None = None,
                 cwd: str | None = None, fix_settings: bool = True) -> None:
        self.overrides: dict[str, Any] = dict(overrides or {})
        self.fix_settings = fix_settings
        self.cwd = os.path.abspath(cwd or os.getcwd())
        #: Whether line lengths and the oldest Python are looked up beside the files (not
        #: for a ready ``fixed`` config: a library caller's :class:`Config` is taken as it
        #: is).
        self.walks = fixed is None or config_file is not None
        if config_file is not None:
            fixed = load_config_file(Path(config_file))
        self.fixed = apply_overrides(fixed, self.overrides) if fixed is not None else None
        self._by_dir: dict[str, Config] = {}
        self._bases: dict[str, Config] = {}
        self._by_file: dict[Path, Config] = {}
        self._default: Config | None = None
        self._widths: dict[str, tuple[int, str] | None] = {}
        self._floors: dict[str, tuple[int, int] | None] = {}
        self._sized: dict[tuple[int, tuple[int, str] | None, tuple[int, int] | None],
                          Config] = {}

    def want_fix_settings(self) -> None:
        """Look up the settings only fixes use from now on (a run that fixes calls it),
        forgetting the directories resolved without them."""
        if not self.fix_settings:
            self.fix_settings = True
            self._by_dir.clear()

    @classmethod
    def of(cls, config: Config | ConfigResolver) -> ConfigResolver:
        """``config`` itself when it is a resolver, else a resolver that always returns it."""
        return config if isinstance(config, ConfigResolver) else cls(fixed=config)

    def for_directory(self, directory: str) -> Config:
        """The settings of files directly inside ``directory``.

        Raises:
            ConfigError: when the config file found is unreadable or invalid.
        """
        key = os.path.abspath(directory)
        cached = self._by_dir.get(key)
        if cached is not None:
            return cached
        config = self._sized_for(self._base_for(key), key)
        self._by_dir[key] = config
        return config

    def _base_for(self, key: str) -> Config:
        """The settings of ``key``'s config file (or the fixed or default ones), before the
        line length of ``key`` is filled in."""
        if self.fixed is not None:
            return self.fixed
        known = self._bases.get(key)
        if known is None:  # each directory is looked at once, however many below it ask
            found = config_file_in(key)
            parent = os.path.dirname(key)
            known = self._load(found) if found is not None else (
                self._base_for(parent) if parent != key else self._defaults())
            self._bases[key] = known
        return known

    def _width_of(self, key: str) -> tuple[int, str] | None:
        """The nearest formatter line length walking up from directory ``key`` (memoized)."""
        if key not in self._widths:
            found = formatter_line_length(key)
            parent = os.path.dirname(key)
            if found is None and parent != key:
                found = self._width_of(parent)
            self._widths[key] = found
        return self._widths[key]

    def _sized_for(self, config: Config, key: str) -> Config:
        """``config`` with the line length of directory ``key`` (its own ``line-length``
        when it sets one, else the nearest ruff or black setting, else the default) and the
        oldest Python declared there (:func:`oldest_python`, once per directory). Equal
        results are one object (``--show-settings`` groups files by object)."""
        if not self.walks or not self.fix_settings:
            return config
        width = None if config.line_length_source else self._width_of(key)
        floor = oldest_python(key, self._floors)
        memo = (id(config), width, floor)
        if memo not in self._sized:
            changes: dict[str, Any] = {"python_floor": floor}
            if width is not None:
                changes.update(line_length=width[0], line_length_source=width[1])
            self._sized[memo] = config.with_overrides(**changes)
        return self._sized[memo]

    def for_file(self, path: str) -> Config:
        """The settings of the file at ``path``.

        Raises:
            ConfigError: as :meth:`for_directory`.
        """
        return self.for_directory(os.path.dirname(os.path.abspath(path)))

    def configs(self) -> list[Config]:
        """Every distinct config resolved so far (for ``--show-settings`` and the cache),
        as directories got them (line length and oldest Python filled in)."""
        if self.fixed is not None and not self._by_dir:
            return [self.fixed]
        seen: dict[tuple[str, str], Config] = {}
        for config in self._by_dir.values():
            seen.setdefault((config.root, config.fingerprint()), config)
        return list(seen.values())

    def _load(self, found: Path) -> Config:
        if found not in self._by_file:
            self._by_file[found] = apply_overrides(load_config_file(found), self.overrides)
        return self._by_file[found]

    def _defaults(self) -> Config:
        if self._default is None:
            self._default = apply_overrides(Config(root=self.cwd), self.overrides)
        return self._default


#: The path of a source read from standard input without ``--stdin-filename`` (``check -``).
STDIN_PATH = "-"
TEST_FILE_PREFIX = "test_"
TEST_FILE_SUFFIX = "_test.py"


def is_test_module(path: str) -> bool:
    """True when ``path``'s file name is one pytest collects by default (``test_*.py``,
    ``*_test.py``): the one definition of a test module by its name. A source read from
    standard input without a name (:data:`STDIN_PATH`) is one too: it was given to be
    checked, as ruff checks it, so it gets what a test module gets."""
    if path == STDIN_PATH:
        return True
    base = os.path.basename(path)
    return base.endswith(TEST_FILE_SUFFIX) or (
        base.startswith(TEST_FILE_PREFIX) and base.endswith(".py"))
