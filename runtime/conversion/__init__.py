"""Foreign formats in: the converter contract (base.py), declarative tensor tables, detection
ranked by specificity (detect.py, which also finds the `oasr.converters` entry points), the
conversion into a bundle (run.py) and `oasr inspect` (inspect.py)."""
