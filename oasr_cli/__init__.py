"""The oasr command line: flags, defaults, printing and exit codes. No tensors here."""
