"""What a check prints, from a run's result.

``present`` makes the whole report (stdout, stderr, exit status); ``output`` renders
violations in each format; ``baseline`` leaves out the violations a suite already
had; ``docs`` renders the rules' documentation.
"""
