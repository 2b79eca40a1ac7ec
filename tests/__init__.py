"""Every test folder is a package: modules import as tests.<folder>.<module>, so two folders may hold
the same file name and a test imports another test module by that dotted path. Shared helpers live
in tests/support (on the path by pyproject's pythonpath) and are imported by their bare names."""
