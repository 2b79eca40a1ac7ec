"""Built-in converters, one module per foreign format, found through the oasr.converters entry points."""
