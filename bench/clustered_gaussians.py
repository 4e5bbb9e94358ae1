"""The synthetic data of bench/practitioner_compare.py, coarse_recall.py and
score_search_time.py: Gaussians around cluster centres, one place.

    rng = np.random.default_rng(0)
    c = centers(rng, 64)
    mean, var = draw(rng, c, 100000)            # variances U(0.02, 0.2)
    mean, var = draw(rng, c, 100000, spread=True)
"""

import numpy as np


def add_arguments(parser):
    """--items, --dim and --queries of the data, with the scripts' defaults."""
    parser.add_argument("--items", type=int, default=100000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--queries", type=int, default=200)


def centers(rng, dim, count=1000):
    """count cluster centres, standard normal in dim dimensions."""
    return rng.normal(size=(count, dim)).astype(np.float32)


def draw(rng, centres, n, spread=False):
    """n Gaussians (mean, var), float32 (n, D): the mean is a random centre
    plus N(0, 0.3^2) noise per dimension; variances uniform in [0.02, 0.2]
    per dimension, or with spread a per-item scale log-uniform over
    [0.01, 1] times U(0.5, 1.5) per dimension (items differing 100-fold in
    total uncertainty)."""
    dim = centres.shape[1]
    labels = rng.integers(0, len(centres), size=n)
    mean = (centres[labels] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)
    if spread:
        scale = np.exp(rng.uniform(np.log(0.01), np.log(1.0), size=(n, 1)))
        var = (scale * rng.uniform(0.5, 1.5, size=(n, dim))).astype(np.float32)
    else:
        var = rng.uniform(0.02, 0.2, size=(n, dim)).astype(np.float32)
    return mean, var
