"""Modules to hold LibCST helpers to LibCST itself on: named shapes of a test, then every
fix fixture and e2e corpus module, as ``(name, bytes)``."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parent


def sample_modules(shapes: dict[str, str]) -> list[tuple[str, bytes]]:
    """``shapes`` (name -> source), then the ``*.py`` files under ``tests/fixtures/fix`` and
    ``tests/e2e/suites`` (named by their path below ``tests/``), as bytes."""
    found = [(name, text.encode()) for name, text in shapes.items()]
    for folder in (ROOT / "fixtures" / "fix", ROOT / "e2e" / "suites"):
        found += [(str(p.relative_to(ROOT)), p.read_bytes())
                  for p in sorted(folder.rglob("*.py"))]
    return found
