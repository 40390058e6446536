"""Configuration that changes what the rules see: engine classes, runner names and
attribute, cleanup functions, isolation decorators, test roots, target."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config, ConfigError, config_from_table
from lint_gpu_tests.fixing.fixloop import fix_source


def found(source: str, config: Config, path: str = "tests/test_x.py") -> list[tuple[int, int, str]]:
    src = textwrap.dedent(source).encode()
    return [(v.location.row, v.location.column, v.code) for v in check_source(src, path, config)]


def test_engine_classes_other_engine() -> None:
    source = """\
        from vllm_omni import Omni
        from vllm import LLM


        def test_omni():
            omni = Omni("Qwen/Qwen2.5-Omni-3B")
            assert omni.generate(["hi"])
        """
    config = config_from_table({"engine-classes": ["vllm_omni.Omni"]}, "t")
    assert found(source, config) == [(6, 12, "GPU001")]
    assert found(source, Config()) == []


def test_runner_attribute_model_and_custom_runner_names() -> None:
    source = """\
        def test_chat(npu_runner):
            with npu_runner("m") as runner:
                model = runner.model
                assert model.chat([])
            bare = npu_runner("m")
            assert bare
        """
    config = config_from_table(
        {"runner-fixture": "npu_runner", "runner-attribute": "model"}, "t")
    assert found(source, config) == [(3, 17, "GPU006"), (5, 12, "GPU005")]
    assert found(source, Config()) == []


def test_cleanup_functions_are_reported_and_removed() -> None:
    source = """\
        from llm_cache_util import force_engine_shutdown
        from vllm import LLM


        def test_generate():
            llm = LLM("m")
            assert llm.generate(["x"])
            force_engine_shutdown(llm)
        """
    config = config_from_table({"cleanup-functions": ["force_engine_shutdown"]}, "t")
    assert found(source, config) == [(6, 11, "GPU001"), (8, 5, "GPU004")]
    assert found(source, Config()) == [(6, 11, "GPU001")]
    outcome = fix_source(textwrap.dedent(source).encode(), "tests/test_x.py", config)
    assert outcome.new_source == textwrap.dedent("""\
        import weakref


        def test_generate(vllm_runner):
            with vllm_runner("m") as runner:
                llm = weakref.proxy(runner.llm)
                assert llm.generate(["x"])
        """).encode()


@pytest.mark.parametrize(("imported", "spelled"), [
    ("from llm_cache_util import force_engine_shutdown", "force_engine_shutdown(llm)"),
    ("from llm_cache_util import force_engine_shutdown as force", "force(llm)"),
    ("import llm_cache_util", "llm_cache_util.force_engine_shutdown(llm)"),
    ("import llm_cache_util as util", "util.force_engine_shutdown(llm)"),
])
def test_a_dotted_cleanup_function_matches_however_it_is_imported(imported: str,
                                                                  spelled: str) -> None:
    """A ``cleanup-functions`` entry with a module path names that function wherever it is
    imported from and under whatever name (a dotted entry matched nothing before)."""
    source = (f"{imported}\nfrom vllm import LLM\n\n\ndef test_generate():\n"
              f'    llm = LLM("m")\n    assert llm.generate(["x"])\n    {spelled}\n')
    config = config_from_table({"cleanup-functions": ["llm_cache_util.force_engine_shutdown"]},
                               "t")
    assert found(source, config) == [(6, 11, "GPU001"), (8, 5, "GPU004")]
    other = config_from_table({"cleanup-functions": ["other_pkg.force_engine_shutdown"]}, "t")
    assert found(source, other) == [(6, 11, "GPU001")]
    outcome = fix_source(source.encode(), "tests/test_x.py", config)
    assert outcome.new_source is not None and spelled not in outcome.new_source.decode()


@pytest.mark.parametrize(("target", "origin", "reported"), [
    ("vllm", "tests.conftest", True),
    ("vllm", "tests.utils", True),
    ("vllm", "mylib.helpers", False),
    ("bundled", "tests.conftest", False),
])
def test_vllms_older_cleanup_helper_under_target_vllm(target: str, origin: str,
                                                        reported: bool) -> None:
    source = (f"from vllm import LLM\n\nfrom {origin} import cleanup\n\n\n"
              'def test_generate():\n    llm = LLM("m")\n    assert llm.generate(["x"])\n'
              "    del llm\n    cleanup()\n")
    config = config_from_table({"target": target}, "t")
    codes = [(row, code) for row, _, code in found(source, config)]
    assert ((10, "GPU004") in codes) is reported
    assert (9, "GPU004") in codes


def test_isolation_decorators_configurable() -> None:
    source = """\
        from vllm import LLM

        from tests.utils import fork_required


        @fork_required
        def test_generate():
            llm = LLM("m")
            assert llm.generate(["x"])
        """
    config = config_from_table({"isolation-decorators": ["fork_required"]}, "t")
    assert found(source, config) == []
    assert found(source, Config()) == [(8, 11, "GPU001")]


def test_test_roots_bring_helper_modules_in_scope(tmp_path: Path) -> None:
    helper = tmp_path / "tests" / "llm_util.py"
    helper.parent.mkdir()
    helper.write_text("from vllm import LLM\n\n\ndef make():\n    return LLM('m')\n")
    config = config_from_table({"test-roots": ["tests"]}, "t", root=str(tmp_path))
    assert found(helper.read_text(), config, str(helper)) == [(5, 12, "GPU001")]
    assert found(helper.read_text(), Config(), str(helper)) == []


def test_target_must_be_known() -> None:
    with pytest.raises(ConfigError, match="`target` must be one of bundled, vllm"):
        config_from_table({"target": "ascend"}, "pyproject.toml")


def test_unknown_key_named() -> None:
    with pytest.raises(ConfigError, match="unknown key `runner-atribute`"):
        config_from_table({"runner-atribute": "model"}, "pyproject.toml")


def test_engine_classes_default_covers_the_defining_module() -> None:
    source = """\
        from vllm.entrypoints.llm import LLM as Engine


        def test_alias():
            engine = Engine("m")
            assert engine.generate(["x"])
        """
    assert Config().engine_classes == ("vllm.LLM",)
    assert found(source, Config()) == [(5, 14, "GPU001")]
    config = config_from_table({"engine-classes": ["vllm.LLM", "vllm_omni.Omni"]}, "t")
    assert found(source, config) == [(5, 14, "GPU001")]


def test_unknown_codes_are_errors_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"`select`: `GPU01` is not a rule code or prefix "
                                          r"\(did you mean `GPU001`\?\)"):
        config_from_table({"select": ["GPU01"]}, "pyproject.toml")
    with pytest.raises(ConfigError, match="`per-file-ignores.tests/\\*`: `XYZ` is not"):
        config_from_table({"per-file-ignores": {"tests/*": ["XYZ"]}}, "pyproject.toml")
    assert config_from_table({"select": ["gpu00", "ALL"]}, "t").select == ("GPU00", "GPU")


def test_unknown_key_suggests_the_known_one() -> None:
    with pytest.raises(ConfigError, match=r"unknown key `traget` .*\(did you mean `target`\?\)"):
        config_from_table({"traget": "vllm"}, "pyproject.toml")


def test_an_unknown_table_of_a_config_file_is_named_as_such(tmp_path: Path) -> None:
    """A ``--config``/``.gpu-test-lint.toml`` file holds its settings at its top level: a table
    there (``[lint]``, as ruff.toml has) is named as a table, and where it is."""
    from lint_gpu_tests.config import load_config_file as load_config

    standalone = tmp_path / "lint.toml"
    standalone.write_text('[lint]\nselect = ["GPU001"]\n')
    with pytest.raises(ConfigError, match=r"unknown table `\[lint\]` at the top level$"):
        load_config(standalone)
    standalone.write_text("bogus = 1\n")
    with pytest.raises(ConfigError, match=r"unknown key `bogus` at the top level$"):
        load_config(standalone)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.gpu-test-lint.lint]\nselect = ["GPU001"]\n')
    with pytest.raises(ConfigError, match=r"unknown table `\[lint\]` in \[tool.gpu-test-lint\]$"):
        load_config(pyproject)
