"""What every rule reads: one module's analysis, built once per check on the ``ast``
tree (never LibCST).

``analysis`` holds ``ModuleAnalysis`` (functions, their kinds, the engines made);
``scopes`` resolves names per scope; ``process_targets`` finds functions run as
their own process; ``mappings`` and ``helper_calls`` follow engines through
containers and helpers; ``env_mutations`` finds the environment changes GPU008
reports and its fix planning rewrites.
"""
