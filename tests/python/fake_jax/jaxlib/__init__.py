"""The stand-in's XLA client (tests/python/fake_jax/README.md): its regions are real driver
allocations, made from this package as the real jaxlib makes them from its own."""
