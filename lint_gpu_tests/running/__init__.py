"""One run over many files: what ``check`` does between the options and the report.

``discovery`` turns paths into files (gitignore, excludes); ``cache`` is the
content-hash result cache; ``leaks`` reads the leak report that confirms violations;
``run`` is the run itself (options, context, prefilter, worker pool).
"""
