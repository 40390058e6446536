"""GPU008's fix and what reads the variable it changes: `monkeypatch` undoes the change
when the test ends, where before it stayed for the tests after it, so a fix of a variable
that another function of the module, or of a conftest.py above it, reads by name is
unsafe; what the function itself reads after its change sees the same value either way."""

from __future__ import annotations

from pathlib import Path

from lint_gpu_tests.checking.checker import check_source
from lint_gpu_tests.config import Config

READ_LATER = ("`test_b` reads `VLLM_X` (line 9), which today sees what this change leaves "
              "behind for the tests after it; `monkeypatch` undoes the change when its test "
              "ends")


def gpu008(source: str, path: str = "tests/test_x.py") -> list[tuple[int, str, str]]:
    """``(row, applicability, reason)`` of each GPU008 in ``source``."""
    return [(v.location.row, v.fix.applicability.value, v.fix.reason)
            for v in check_source(source.encode(), path, Config()) if v.code == "GPU008"
            and v.fix is not None]


def test_a_read_in_a_later_test_makes_the_fix_unsafe() -> None:
    source = ("import os\n\n\ndef test_a():\n    os.environ['VLLM_X'] = 'a'\n\n\n"
              "def test_b():\n    assert os.environ['VLLM_X'] == 'a'\n")
    assert gpu008(source) == [(5, "unsafe", READ_LATER)]


def test_a_read_after_the_change_in_its_own_test_keeps_the_fix_safe() -> None:
    source = ("import os\n\n\ndef test_a():\n    os.environ['VLLM_X'] = 'a'\n"
              "    assert os.environ['VLLM_X'] == 'a'\n")
    assert gpu008(source) == [(5, "safe", "")]


def test_a_read_at_import_keeps_the_fix_safe() -> None:
    source = ("import os\n\nLEVEL = os.environ.get('VLLM_X')\n\n\n"
              "def test_a():\n    os.environ['VLLM_X'] = 'a'\n")
    assert gpu008(source) == [(7, "safe", "")]


def test_a_save_and_restore_in_one_fixture_is_not_a_read() -> None:
    source = ("import os\n\nimport pytest\n\n\n@pytest.fixture\ndef offline():\n"
              "    old = os.environ.get('HF_HUB_OFFLINE')\n"
              "    os.environ['HF_HUB_OFFLINE'] = '1'\n    yield\n"
              "    if old is None:\n        del os.environ['HF_HUB_OFFLINE']\n    else:\n"
              "        os.environ['HF_HUB_OFFLINE'] = old\n")
    assert gpu008(source) == [(9, "safe", ""), (12, "safe", ""), (14, "safe", "")]


def test_a_read_in_a_conftest_above_makes_the_fix_unsafe(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        "import os\n\nimport pytest\n\n\n@pytest.fixture(autouse=True)\ndef mode():\n"
        "    yield os.getenv('VLLM_X')\n")
    test = tests / "test_x.py"
    test.write_text("import os\n\n\ndef test_a():\n    os.environ['VLLM_X'] = 'a'\n")
    assert gpu008(test.read_text(), str(test)) == [(5, "unsafe", (
        "a conftest.py above this module reads `VLLM_X`, which today sees what this change "
        "leaves behind for the tests after it; `monkeypatch` undoes the change when its test "
        "ends"))]
    (tests / "conftest.py").write_text("import os\n\n\ndef helper():\n    return os.environ\n")
    assert gpu008(test.read_text(), str(test)) == [(5, "safe", "")]


def test_a_read_while_the_fixtures_change_holds_is_not_a_reader() -> None:
    """A test requesting the fixture reads the variable while the change holds, before the
    fix and after it; a test that does not request it sees the leak today."""
    source = ("import os\n\nimport pytest\n\n\n@pytest.fixture\ndef v1():\n"
              "    os.environ['VLLM_X'] = '1'\n    yield\n\n\n"
              "def test_with(v1):\n    assert os.environ['VLLM_X'] == '1'\n")
    assert gpu008(source) == [(8, "safe", "")]
    source += "\n\ndef test_without():\n    assert 'VLLM_X' not in os.environ\n"
    assert gpu008(source) == [(8, "unsafe", (
        "`test_without` reads `VLLM_X` (line 17), which today sees what this change leaves "
        "behind for the tests after it; `monkeypatch` undoes the change when its test ends"))]


def test_a_saved_value_set_back_without_a_test_for_none_may_not_be_a_string() -> None:
    """``old = os.environ.get(...)`` is ``None`` when the variable is unset: setting it
    back raises ``TypeError`` today, where ``monkeypatch.setenv`` would set ``"None"``. A
    test for ``None`` around the write, a subscript read or a string default make it a
    string."""
    may_not = ("`old` may not be a string: the environment takes only strings (anything else "
               "raises `TypeError`), where `monkeypatch.setenv` converts any value (with a "
               "warning)")
    source = ("import os\n\n\ndef test_a(tmp_path):\n"
              "    old = os.environ.get('HF_HOME', None)\n"
              "    os.environ['HF_HOME'] = str(tmp_path)\n"
              "    os.environ['HF_HOME'] = old\n")
    assert gpu008(source) == [(6, "safe", ""), (7, "unsafe", may_not)]
    guarded = source.replace("    os.environ['HF_HOME'] = old\n",
                             "    if old:\n        os.environ['HF_HOME'] = old\n")
    assert gpu008(guarded) == [(6, "safe", ""), (8, "safe", "")]
    for read in ("os.environ['HF_HOME']", "os.environ.get('HF_HOME', '')",
                 "os.getenv('HF_HOME', default='/tmp')"):
        assert gpu008(source.replace("os.environ.get('HF_HOME', None)", read)) == [
            (6, "safe", ""), (7, "safe", "")]


def test_values_that_are_strings_whatever_the_environment_holds() -> None:
    """A read with a string default, ``old or "0"``, a write in the ``else`` of ``if not
    old:`` and one after ``if old is None: return`` always set a string: the fix is
    safe."""
    head = "import os\n\n\ndef test_a():\n"
    for body, row in (("    os.environ['VLLM_P'] = os.environ.get('VLLM_Q', 'x')\n", 5),
                      ("    os.environ['VLLM_P'] = os.getenv('VLLM_Q', 'x')\n", 5),
                      ("    old = os.environ.get('VLLM_Q') or '0'\n"
                       "    os.environ['VLLM_P'] = old\n", 6),
                      ("    old = os.environ.get('VLLM_Q')\n"
                       "    os.environ['VLLM_P'] = old or '0'\n", 6),
                      ("    old = os.environ.get('VLLM_Q')\n    if not old:\n        pass\n"
                       "    else:\n        os.environ['VLLM_P'] = old\n", 9),
                      ("    old = os.environ.get('VLLM_Q')\n    if old is None:\n"
                       "        return\n    os.environ['VLLM_P'] = old\n", 8)):
        assert gpu008(head + body) == [(row, "safe", "")], body
