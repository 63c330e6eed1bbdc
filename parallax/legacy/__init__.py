"""The original Parallax's API, on top of everything: `parallax.parallel_run` (run), its configuration classes
(config) and `parallax.partition` (partition). The old spellings stay importable from `parallax`."""
