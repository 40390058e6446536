"""Source text in and out: the bottom layer of the linter, over ``codes``, ``ftypes``
and ``config``.

``source`` decodes bytes and parses them into an ``ast`` tree (and walks it);
``syntax`` answers small questions about ``ast`` nodes; ``noqa`` reads ``# noqa``
comments; ``prefilter`` settles from the bytes alone a file no enabled rule starts
from; ``writer`` writes a file's new bytes atomically.
"""
