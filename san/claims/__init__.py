"""Claims declared once: the record every wing's claim is stated in (:mod:`san.claims.record`: its words, source,
scope, measure, threshold with its history, near-miss wrong theory, placebo and caveats) and the caveats that travel
with a verdict to every table that shows it (:mod:`san.claims.caveats`)."""
