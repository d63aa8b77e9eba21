"""Memory tiers: the parts a ``MemoryStore`` is composed of, each built with its dependencies."""
