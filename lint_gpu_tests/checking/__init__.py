"""One file checked: source in, violations out.

``checker`` parses a file, builds its analysis, runs every enabled rule and applies
``# noqa``; ``conftest_index`` knows the engine fixtures of the ``conftest.py``
files above a test module, ``helper_index`` the engine helpers of the tree's other
modules.
"""
