"""The report: the paper's claims checked against a run's results (``claims``) and the run's runtimes."""
