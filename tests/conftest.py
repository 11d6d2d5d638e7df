import pytest

from conformance import make_rng


@pytest.fixture
def rng():
    """A fresh random generator; its seed is printed when a test fails."""
    gen, seed = make_rng()
    print(f"random seed: {seed}")
    return gen
