"""Backends by platform, started on first use (JAX starts its backends lazily too)."""

_backends = {}


def get_backend(platform=None):
    if "cuda" not in _backends:
        from jaxlib.xla_client import Client

        _backends["cuda"] = Client()
    return _backends["cuda"]
