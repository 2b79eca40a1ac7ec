"""Model by name: ``-m NAME|auto|org/repo|PATH`` -> a native bundle folder.

``catalog.py`` (+ ``catalog.yaml``): the registry of model names and where their weights are;
``resolve.py``: the resolution chain and the public functions (``resolve_model``,
``describe_resolution``, ``remove_model``, ...); ``sources.py``: the chain's primitives;
``chain.py`` / ``paths.py``: the chain of a name and of a path; ``kinds/``: one module per kind
of catalog source (hf, pypi, url; the ``oasr.sources`` entry points), each with its parser, its
steps of the chain and its provenance label;
``fields.py``: the strict reading of registry fields; ``cache.py``, ``hf.py``, ``pypi.py``: the
oasr cache, huggingface_hub and pip.
"""
