"""The report: every wing's claims gathered into summary.json and the captions (``captions``); the runtimes."""
