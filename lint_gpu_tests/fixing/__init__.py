"""One file fixed, and a fix shown as text.

``fixloop`` runs a file's fix loop (check, one codemod pass, check again);
``edits`` turns two versions of a file into edits and unified diffs.
"""
