"""A run killed part-way, for the resume tests: an engine call that raises ``KeyboardInterrupt`` the second time."""


def interrupt_second_call(monkeypatch, owner, name: str):
    """Make ``owner.name`` (e.g. ``HFBackend.score``) raise ``KeyboardInterrupt`` on its second call, as a run killed
    after its first engine call; returns the real function, to put back with ``monkeypatch.setattr``."""
    real, calls = getattr(owner, name), {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, interrupted)
    return real
