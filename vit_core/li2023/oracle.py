"""How hard Paper A's data are for rules that know the patterns, before any model trains (numpy
only: the report computes it without torch).

A regime that a linear rule on the mean token already solves with a wide margin says little
about attention: any model that averages its tokens can learn it. Two oracle rules are scored on
fresh samples of a data config, both reading the projection on w = (mu_1 - mu_2) / |mu_1 - mu_2|:
- the *mean-token rule* sign(<mean_l x_l, w>): its error and its smallest margin in units of the
  token noise's standard deviation along w;
- the *single-token rule* sign(<x_l, w>) at one position (positions are shuffled, so any one):
  the best a model reading one token can do with this direction.
A token is its pattern plus noise of norm r in a uniform direction, so its projection on w is
<mu, w> + r·u with u the first coordinate of a uniform unit vector of R^d (u^2 ~ Beta(1/2, (d-1)/2),
its sign even): the samples are exact draws of the data's distribution, from their own stream.
"""

import numpy as np

from vit_core.li2023.configs import TokenDataConfig
from vit_core.li2023.layout import draw_layout, make_patterns
from vit_core.seeding import Stream, numpy_rng

CHUNK = 1000  # samples drawn at once


def oracle_rules(cfg: TokenDataConfig, n: int = 10_000, seed: int = 0) -> dict[str, float]:
    """The two oracle rules on n samples of (seed, Stream.DIFFICULTY): ``mean_token_error``,
    ``mean_token_margin_sigma`` (the smallest y<mean x, w> over its noise's std; negative where
    the rule errs) and ``single_token_error``."""
    patterns = make_patterns(cfg)
    w = patterns[0] - patterns[1]
    on_w = patterns @ (w / np.linalg.norm(w))  # <mu_j, w> per pattern
    mean_wrong = single_wrong = 0
    smallest = np.inf
    for chunk, start in enumerate(range(0, n, CHUNK)):
        rng = numpy_rng(seed, Stream.DIFFICULTY, chunk)
        layout = draw_layout(cfg, min(CHUNK, n - start), rng)
        shape = layout.noise_norm.shape
        u = np.sqrt(rng.beta(0.5, (cfg.dim - 1) / 2, shape)) if cfg.dim > 1 else np.ones(shape)
        u *= rng.choice(np.array([-1.0, 1.0]), shape)
        along = (on_w[layout.pattern_index] + layout.noise_norm * u) * layout.labels[:, None]  # y <x_l, w>
        margin = along.mean(-1)
        noise_std = np.sqrt((layout.noise_norm**2).sum(-1) / cfg.dim) / cfg.n_tokens  # of <mean noise, w>
        mean_wrong += int((~(margin > 0)).sum())
        single_wrong += int((~(along[:, 0] > 0)).sum())
        smallest = min(smallest, float((margin / noise_std).min()))
    return {
        "mean_token_error": mean_wrong / n,
        "mean_token_margin_sigma": smallest,
        "single_token_error": single_wrong / n,
    }
