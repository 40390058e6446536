"""Import placement in the module's own style (isort-like sections).

LibCST's ``AddImportsVisitor`` appends new imports after the last import of the top
block; a stdlib ``import weakref`` belongs with the other stdlib imports instead, and
removing an import must not glue two sections together.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

import libcst as cst

from lint_gpu_tests.codemods._cst import leading_lines

STDLIB = frozenset(sys.stdlib_module_names)


def _name_code(node: cst.CSTNode) -> str:
    """The code of an imported name or module (``Module([]).code_for_node(node)``): a plain
    name's value without generating code."""
    if isinstance(node, cst.Name) and not node.lpar:
        return node.value
    return cst.Module([]).code_for_node(node)


def _top_module(stmt: cst.BaseStatement) -> tuple[str, bool] | None:
    """``(top-level module, is_plain_import)`` of an import statement line, else ``None``."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Import):
        name = _name_code(small.names[0].name)
        return name.split(".")[0], True
    if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
        name = _name_code(small.module)
        return name.split(".")[0], False
    return None


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _import_block(body: Sequence[cst.BaseStatement]) -> tuple[int, int]:
    """``(start, end)`` indices of the top import block, after any docstring and
    ``__future__`` imports."""
    start = 0
    while start < len(body) and (_is_docstring(body[start]) or (
        (info := _top_module(body[start])) is not None and info[0] == "__future__")):
        start += 1
    end = start
    while end < len(body) and _top_module(body[end]) is not None:
        end += 1
    return start, end


def _block_with(body: Sequence[cst.BaseStatement], start: int, end: int,
                section: Callable[[str], bool]) -> tuple[int, int]:
    """The import block a new import of ``section`` (a test of its top-level module) goes
    into: the top block ``body[start:end]`` when it holds one of the section, else the
    first later block of module-level imports that does (imports placed after code, as
    after ``os.environ[...] = ...`` lines that must run first), else the top block."""
    if any((info := _top_module(body[i])) is not None and section(info[0])
           for i in range(start, end)):
        return start, end
    i = end
    while i < len(body):
        if _top_module(body[i]) is None:
            i += 1
            continue
        j = i
        while j < len(body) and _top_module(body[j]) is not None:
            j += 1
        if any(section(info[0]) for k in range(i, j)
               if (info := _top_module(body[k])) is not None):
            return i, j
        i = j
    return start, end


def _third_party(first_party: frozenset[str]) -> Callable[[str], bool]:
    """The test of a top-level module name for the third-party section: neither the
    standard library's nor one of ``first_party``."""
    return lambda top: top not in STDLIB and top not in first_party


def _blank() -> cst.EmptyLine:
    return cst.EmptyLine()


def has_blank(stmt: cst.BaseStatement) -> bool:
    """True when the statement is preceded by a blank line."""
    return any(line.comment is None for line in leading_lines(stmt))


def _lead(stmt: cst.BaseStatement, index: int) -> list[cst.EmptyLine]:
    """Leading lines to move onto a new first import: at the top of the module, blank
    lines are dropped (a removed first import leaves its successor's spacing behind)."""
    lines = list(leading_lines(stmt))
    if index == 0:
        while lines and lines[0].comment is None:
            lines.pop(0)
    return lines


def add_stdlib_import(module: cst.Module, name: str) -> cst.Module:
    """Add ``import name`` (a stdlib module) among the module's stdlib imports.

    Placed alphabetically among the plain stdlib ``import`` lines of the top import block;
    when there are none, before the first import, separated from a third-party section by a
    blank line. Nothing is added when ``import name`` already exists at top level.
    """
    body = list(module.body)
    for stmt in body:
        info = _top_module(stmt)
        if info == (name, True) and isinstance(stmt, cst.SimpleStatementLine):
            small = stmt.body[0]
            if isinstance(small, cst.Import) and any(
                _name_code(a.name) == name and a.asname is None
                for a in small.names
            ):
                return module
    new_stmt = cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(
        name=cst.Name(name))])])
    start, end = _import_block(body)
    block = body[start:end]
    stdlib = [(i + start, info) for i, s in enumerate(block)
              if (info := _top_module(s)) is not None and info[0] in STDLIB]
    if stdlib:
        plain = [(i, info) for i, info in stdlib if info[1]]
        if plain:
            after = [i for i, info in plain if info[0] > name]
            index = after[0] if after else plain[-1][0] + 1
        else:
            index = stdlib[0][0]
        if index < len(body) and index in [i for i, _ in stdlib] and has_blank(body[index]) \
                and index != start:
            pass
        target = body[index] if index < len(body) else None
        if target is not None and index == stdlib[0][0]:
            # Take over the leading lines of the first stdlib import (comments, spacing).
            new_stmt = new_stmt.with_changes(leading_lines=_lead(target, index))
            body[index] = target.with_changes(leading_lines=[])
        body.insert(index, new_stmt)
        return module.with_changes(body=body)
    if block:
        # The new stdlib section takes the first import's leading lines, except a comment
        # block of that import's own section (after the last blank line: ``# Third
        # party`` when a removed stdlib section's comment sits above it).
        first = body[start]
        lines = list(first.leading_lines)
        blanks = [i for i, line in enumerate(lines) if line.comment is None]
        own: list[cst.EmptyLine] = []
        if blanks and blanks[-1] < len(lines) - 1:
            own = lines[blanks[-1] + 1:]
            first = first.with_changes(leading_lines=lines[:blanks[-1]])
        new_stmt = new_stmt.with_changes(leading_lines=_lead(first, start))
        body[start] = first.with_changes(leading_lines=[_blank(), *own])
        body.insert(start, new_stmt)
    else:
        if start < len(body):
            body[start] = body[start].with_changes(
                leading_lines=[_blank(), _blank(), *body[start].leading_lines]
            ) if not has_blank(body[start]) else body[start]
        new_stmt = new_stmt.with_changes(leading_lines=[_blank()] if start else [])
        body.insert(start, new_stmt)
    return module.with_changes(body=body)


def _key(stmt: cst.BaseStatement) -> tuple[str, str] | None:
    """Identity of an import line that survives edits of its names: kind and module."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Import):
        return ("import", ",".join(_name_code(a.name) for a in small.names))
    if isinstance(small, cst.ImportFrom) and small.module is not None:
        dots = "." * len(small.relative)
        return ("from", dots + _name_code(small.module))
    return None


def has_from_import(module: cst.Module, mod: str) -> bool:
    """True when the module has a top-level ``from mod import ...``."""
    return any(_key(s) == ("from", mod) for s in module.body)


def imports_name(module: cst.Module, name: str) -> bool:
    """True when a top-level ``from ... import`` of the module binds ``name`` (as it is,
    or as its ``as`` name): ``from tests.conftest import VllmRunner``, ``from .conftest
    import VllmRunner``."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.ImportFrom) and not isinstance(small.names,
                                                                    cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    if isinstance(bound, cst.Name) and bound.value == name:
                        return True
    return False


def add_from_import(module: cst.Module, mod: str, name: str,
                    first_party: frozenset[str] = frozenset()) -> cst.Module:
    """Add ``from mod import name`` in isort order.

    A third-party module goes among the third-party ``from`` imports of the top block,
    sorted by module (of the first later block holding one, where the top block holds
    none: :func:`_block_with`); after the whole block, as a new section, when there is no
    third-party import. A module of a package in ``first_party`` (``vllm`` inside vLLM's
    own tree) goes among that package's imports, or opens a section of its own after the
    third-party one.
    """
    body = list(module.body)
    new_stmt = cst.parse_statement(f"from {mod} import {name}")
    start, end = _import_block(body)
    section: Callable[[str], bool] = (
        (lambda top: top in first_party) if mod.split(".")[0] in first_party else
        _third_party(first_party))
    start, end = _block_with(body, start, end, section)
    third = [i for i in range(start, end)
             if (info := _top_module(body[i])) is not None and section(info[0])]
    if not third and mod.split(".")[0] in first_party:
        others = [i for i in range(start, end) if _top_module(body[i]) is not None
                  and _top_module(body[i])[0] not in first_party]  # type: ignore[index]
        index = others[-1] + 1 if others else end
        new_stmt = new_stmt.with_changes(leading_lines=[_blank()] if others else [])
        body.insert(index, new_stmt)
        return module.with_changes(body=body)
    if third:
        froms = [i for i in third if _key(body[i])[0] == "from"]  # type: ignore[index]
        later = [i for i in froms if _key(body[i])[1] > mod]  # type: ignore[index]
        if later:
            index = later[0]
            target = body[index]
            if index == third[0]:
                new_stmt = new_stmt.with_changes(leading_lines=target.leading_lines)
                body[index] = target.with_changes(leading_lines=[])
        else:
            index = (froms[-1] if froms else third[-1]) + 1
        body.insert(index, new_stmt)
    else:
        new_stmt = new_stmt.with_changes(leading_lines=[_blank()] if end > start else [])
        body.insert(end, new_stmt)
    return module.with_changes(body=body)


def add_third_party_import(module: cst.Module, name: str,
                           first_party: frozenset[str] = frozenset()) -> cst.Module:
    """Add ``import name`` (a third-party module such as ``pytest``) in isort order: among
    the plain imports of the third-party section of the top block (or of the first later
    block holding one: :func:`_block_with`; up to its first blank line), which come before
    its ``from`` imports; as a new section after the standard library's (before a
    first-party one) when there is none. Nothing is added when ``import name`` is already
    there."""
    body = list(module.body)
    if any(_key(s) == ("import", name) for s in body):
        return module
    new_stmt = cst.parse_statement(f"import {name}")
    third_party = _third_party(first_party)
    start, end = _block_with(body, *_import_block(body), third_party)
    third = [i for i in range(start, end) if (info := _top_module(body[i])) is not None
             and third_party(info[0])]
    # The first of them and those after it up to a blank line: the block's own section
    # (what a blank line sets apart is another section to the module's author, as a
    # first-party one this module's path does not show).
    third = [i for i in third if i == third[0] or not any(
        has_blank(body[k]) for k in range(third[0] + 1, i + 1))]
    if third:
        plain = [i for i in third if _key(body[i])[0] == "import"]  # type: ignore[index]
        later = [i for i in plain if _key(body[i])[1] > name]  # type: ignore[index]
        index = later[0] if later else plain[-1] + 1 if plain else third[0]
        if index == third[0]:
            new_stmt = new_stmt.with_changes(leading_lines=body[index].leading_lines)
            body[index] = body[index].with_changes(leading_lines=[])
        body.insert(index, new_stmt)
        return module.with_changes(body=body)
    firsts = [i for i in range(start, end) if (info := _top_module(body[i])) is not None
              and info[0] in first_party]
    index = firsts[0] if firsts else end
    new_stmt = new_stmt.with_changes(leading_lines=[_blank()] if index > start else [])
    if index < end and not has_blank(body[index]):
        body[index] = body[index].with_changes(
            leading_lines=[_blank(), *body[index].leading_lines])
    body.insert(index, new_stmt)
    return module.with_changes(body=body)


def first_party_packages(path: str, root: str) -> frozenset[str]:
    """``{"vllm"}`` when the file lies in vLLM's own tree, else empty: there isort and
    ruff sort ``vllm`` imports as first-party.

    vLLM's tree is a ``vllm/`` package in the configuration's root, or in a directory
    above the file up to its project root (the first with ``pyproject.toml``,
    ``setup.py``, ``setup.cfg`` or ``.git``; a vLLM checkout next to a plugin's project
    does not count).
    """
    candidates = [os.path.abspath(root)]
    current = os.path.dirname(os.path.abspath(path))
    while True:
        candidates.append(current)
        parent = os.path.dirname(current)
        if parent == current or any(os.path.exists(os.path.join(current, marker)) for marker
                                    in ("pyproject.toml", "setup.py", "setup.cfg", ".git")):
            break
        current = parent
    for directory in candidates:
        if os.path.isfile(os.path.join(directory, "vllm", "__init__.py")):
            return frozenset({"vllm"})
    return frozenset()


def keep_import_comments(before: cst.Module, after: cst.Module) -> cst.Module:
    """Keep the comments above an import that the rewrite removed (``# Third party``
    over ``from vllm import LLM``): they move onto the next statement that is left.

    ``after`` must be ``before`` with some top-level import lines removed (the other
    statements in the same order); otherwise ``after`` is returned unchanged.
    """
    survivors = [k for s in after.body if (k := _key(s)) is not None]
    pending: list[cst.EmptyLine] = []
    body = list(after.body)
    j = 0
    changed = False
    remaining = list(survivors)
    for stmt in before.body:
        key = _key(stmt)
        if key is not None and key not in remaining:
            if any(line.comment is not None for line in stmt.leading_lines):
                pending.extend(stmt.leading_lines)
            continue
        if key is not None:
            remaining.remove(key)
        if j >= len(body):
            return after
        if pending:
            target = body[j]
            lines = list(target.leading_lines)
            if j == 0 and before.body and stmt is not before.body[0]:
                while pending and pending[0].comment is None and not lines:
                    pending.pop(0)
            if pending and pending[-1].comment is None and lines and lines[0].comment is None:
                pending.pop()  # one blank line below the comments, as above the import
            body[j] = target.with_changes(leading_lines=[*pending, *lines])
            pending = []
            changed = True
        j += 1
    if j != len(body):
        return after
    return after.with_changes(body=body) if changed else after


def strip_top_blank(before: cst.Module, after: cst.Module) -> cst.Module:
    """When the rewrite removed a module's first lines (its only imports), no blank line is
    left at the top of the file unless the original started with one."""
    if not after.body or after.header or not before.body or before.header or \
            has_blank(before.body[0]):
        return after
    first = after.body[0]
    lines = list(first.leading_lines)
    if not lines or lines[0].comment is not None:
        return after
    while lines and lines[0].comment is None:
        lines.pop(0)
    return after.with_changes(body=[first.with_changes(leading_lines=lines), *after.body[1:]])


def restore_section_breaks(before: cst.Module, after: cst.Module) -> cst.Module:
    """Keep blank lines that separated import sections when an import is removed.

    A removed import line takes its leading blank line with it; the next surviving import
    gets that blank line back, so sections stay apart. Also separates a stdlib import
    from a following third-party one when they became adjacent.
    """
    old = [(k, has_blank(s)) for s in before.body if (k := _key(s)) is not None]
    old_index = {k: i for i, (k, _) in enumerate(old)}
    body = list(after.body)
    survivors = {k for s in body if (k := _key(s)) is not None}
    changed = False
    for i, stmt in enumerate(body):
        key = _key(stmt)
        if key is None or key not in old_index or has_blank(stmt) or i == 0:
            continue
        j = old_index[key] - 1
        blank = False
        while j >= 0 and old[j][0] not in survivors:
            blank = blank or old[j][1]
            j -= 1
        prev, cur = _top_module(body[i - 1]), _top_module(stmt)
        glued = (prev is not None and cur is not None and prev[0] in STDLIB
                 and prev[0] != "__future__" and cur[0] not in STDLIB
                 and _key(body[i - 1]) not in old_index)
        if (blank and j + 1 < old_index[key]) or glued:
            body[i] = stmt.with_changes(leading_lines=[_blank(), *stmt.leading_lines])
            changed = True
    # The first import keeps the spacing the original first import had after a docstring.
    old_first = next((s for s in before.body if _key(s) is not None), None)
    new_first = next((i for i, s in enumerate(body) if _key(s) is not None), None)
    if old_first is not None and new_first and has_blank(old_first) and \
            not has_blank(body[new_first]):
        body[new_first] = body[new_first].with_changes(
            leading_lines=[_blank(), *body[new_first].leading_lines])
        changed = True
    # A new import directly above an import of its own section that got back the blank line
    # of a removed one (``import gc`` gone from above ``from types import ...``): the blank
    # line opens the section above the new import instead, as it did above the removed one.
    old_blank = dict(old)
    for i, stmt in enumerate(body[:-1]):
        key, cur, nxt = _key(stmt), _top_module(stmt), body[i + 1]
        nxt_key, nxt_top = _key(nxt), _top_module(nxt)
        if key is None or key in old_index or cur is None or i == 0 or nxt_key is None or \
                nxt_top is None or nxt_key not in old_blank or old_blank[nxt_key] or \
                not has_blank(nxt) or (nxt_top[0] in STDLIB) != (cur[0] in STDLIB):
            continue
        lines = list(nxt.leading_lines)
        if lines[0].comment is not None:
            continue
        body[i + 1] = nxt.with_changes(leading_lines=lines[1:])
        if not has_blank(stmt):
            body[i] = stmt.with_changes(leading_lines=[_blank(), *stmt.leading_lines])
        changed = True
    return after.with_changes(body=body) if changed else after


def merge_from_imports(module: cst.Module, imports: Sequence[tuple[str, str]],
                       filename: str | None) -> cst.Module:
    """Add ``from mod import obj`` for each of ``imports`` into the module's existing
    ``from mod import ...`` statement, with LibCST's ``AddImportsVisitor`` (imported here:
    its codemod framework loads only when a rewrite needs this)."""
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    context = CodemodContext(filename=filename)
    for mod, obj in imports:
        AddImportsVisitor.add_needed_import(context, mod, obj)
    merged = AddImportsVisitor(context).transform_module(module)
    mods = {mod for mod, _ in imports}
    sorted_before = {mod for mod in mods
                     if all(_in_type_order(names) for names in _from_names(module, mod))}
    body = [_sort_names(stmt, sorted_before) for stmt in merged.body]
    return merged.with_changes(body=body)


def type_order(name: str) -> tuple[int, str]:
    """isort's ``order-by-type`` key, ruff's default for the names of a ``from`` import:
    constants (``MAX_LEN``), then classes (``VllmRunner``), then the rest
    (``create_new_process_for_each_test``), each group by name."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name


def _alias_name(alias: cst.ImportAlias) -> str:
    return _name_code(alias.name)


def _in_type_order(names: Sequence[str]) -> bool:
    return list(names) == sorted(names, key=type_order)


def _from_names(module: cst.Module, mod: str) -> list[list[str]]:
    """The imported names of each top-level ``from mod import ...`` of ``module``."""
    found = []
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.ImportFrom) and small.module is not None and \
                        _name_code(small.module) == mod and not small.relative and \
                        not isinstance(small.names, cst.ImportStar):
                    found.append([_alias_name(a) for a in small.names])
    return found


def _sort_names(stmt: cst.BaseStatement, mods: set[str]) -> cst.BaseStatement:
    """``stmt`` with the names of its ``from mod import ...`` (``mod`` in ``mods``, one line,
    no comments) in :func:`type_order`, as ruff's isort rule wants them; else unchanged."""
    key = _key(stmt)
    if key is None or key[0] != "from" or key[1] not in mods:
        return stmt
    small = stmt.body[0]  # type: ignore[attr-defined]
    if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar) \
            or small.lpar is not None:
        return stmt
    names = list(small.names)
    ordered = sorted(names, key=lambda a: type_order(_alias_name(a)))
    if ordered == names:
        return stmt
    commas = [a.comma for a in names]
    return stmt.with_changes(body=[small.with_changes(
        names=[a.with_changes(comma=c) for a, c in zip(ordered, commas, strict=True)])])
