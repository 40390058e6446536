"""Where the fix looks for vLLM's own tree (``vllm`` first-party)."""

from __future__ import annotations

from pathlib import Path

from lint_gpu_tests.codemods._imports import first_party_packages


def _package(directory: Path) -> None:
    (directory / "vllm").mkdir(parents=True)
    (directory / "vllm" / "__init__.py").write_text("")


def test_vllm_tree_found_above_the_file(tmp_path: Path) -> None:
    repo = tmp_path / "vllm-repo"
    _package(repo)
    (repo / "pyproject.toml").write_text("")
    (repo / "tests" / "models").mkdir(parents=True)
    path = repo / "tests" / "models" / "test_x.py"
    assert first_party_packages(str(path), str(tmp_path / "elsewhere")) == {"vllm"}


def test_vllm_checkout_next_to_a_plugin_does_not_count(tmp_path: Path) -> None:
    _package(tmp_path)  # e.g. ~/vllm cloned next to ~/vllm-ascend
    plugin = tmp_path / "vllm-ascend"
    (plugin / "tests").mkdir(parents=True)
    (plugin / ".git").mkdir()
    path = plugin / "tests" / "test_x.py"
    assert first_party_packages(str(path), str(plugin)) == frozenset()


def test_configuration_root_counts(tmp_path: Path) -> None:
    _package(tmp_path / "root")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "setup.cfg").write_text("")
    path = tmp_path / "proj" / "test_x.py"
    assert first_party_packages(str(path), str(tmp_path / "root")) == {"vllm"}
