"""Paper A's data and model configs (Li, Wang, Liu, Chen, ICLR 2023): what defines its token data
and its models, the per-sample premises of Theorem 1, and the checks across them (training's
config is vit_core.train_config; real images' is vit_core.image_config; the model kinds are
declared in vit_core.li2023.kinds). Plain dataclasses and numpy, no torch, so that a spec is
validated (and results are read) without loading torch; the modules that sample and build take
these configs.

Each field carries its default and a one-line help text (``param``), read by the CLI's flags and
the sweep specs' fields. A value that is not allowed raises ConfigError naming the field.
"""

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from vit_core.fields import ConfigError, check_choices, param
from vit_core.li2023.kinds import KINDS, Kind, kinds_help
from vit_core.sparsify import SparsifyStrategy

NoisyKind = Literal["any", "irrelevant", "relevant", "confusion"]
Counts = Literal["fixed", "binomial", "premised"]
CONFUSION_BOUND = 1 / (2 * math.e)  # Theorem 1: alpha* >= alpha# / c with c < 1/(2e)
TOKENS = 4  # "L large enough", our reading: alpha* L label-relevant tokens in an average sample at least
MIN_KEPT = 1e-3  # the least share of binomial draws a reading of the counts may keep (else: a ConfigError)


def sample_premises(relevant, confusion) -> dict:
    """Theorem 1's premises on alpha* and alpha# read per sample from its (label-relevant, confusion)
    counts (ints or numpy arrays), by name: its own confusion ratio below 1/(2e), at least TOKENS
    label-relevant tokens, a vote that no single token decides (margin >= 2; the first two imply it,
    and it is the premise the near ties break)."""
    return {
        "confusion": confusion < CONFUSION_BOUND * relevant,
        "tokens": relevant >= TOKENS,
        "margin >= 2": relevant - confusion >= 2,
    }


def kept_counts(counts: Counts, relevant, confusion):
    """Which per-sample (label-relevant, confusion) counts a reading keeps (ints or numpy arrays):
    ``binomial`` those where the label wins the vote; ``premised`` those that also meet every
    premise of ``sample_premises``."""
    vote = relevant > confusion
    if counts != "premised":
        return vote
    for met in sample_premises(relevant, confusion).values():
        vote = vote & met
    return vote


@dataclass(frozen=True)
class TokenDataConfig:
    """Everything that defines Paper A's data distribution (and the token set S^n)."""

    dim: int = param(20, "d, the token dimension")
    n_patterns: int = param(20, "M, the number of patterns; 0 and 1 are the discriminative ones")
    n_tokens: int = param(60, "L, tokens per sample")
    alpha_star: float = param(0.3, "alpha*, the mean fraction of label-relevant tokens")
    alpha_confusion: float | None = param(
        None, "alpha#, the mean fraction of confusion tokens (default: confusion_ratio * alpha*)"
    )
    confusion_ratio: float = param(1 / 6, "alpha# / alpha* when alpha_confusion is not given")
    tau: float = param(0.3, "bound on a token's noise norm (norm uniform on [0, tau])")
    counts: Counts = param(
        "fixed",
        "per-sample token counts: fixed round(alpha*·L); binomial (draws losing the vote redrawn); premised "
        "(binomial draws kept only where the sample meets Theorem 1's premises on its own)",
    )
    patterns: Literal["orthonormal", "gaussian"] = param("orthonormal", "orthonormal patterns, or random unit vectors")
    pattern_seed: int = param(0, "seed of the patterns, shared by every model")
    sparsify: SparsifyStrategy = param(
        "all", "token set S^n: all, or remove sparsify_k random / label_irrelevant / noisiest tokens"
    )
    sparsify_k: int = param(0, "tokens removed per sample by sparsify")
    noisy_fraction: float = param(
        0.0, "share of each sample's L tokens, round(noisy_fraction·L), whose noise norm is tau_big (noisy tokens)"
    )
    tau_big: float = param(3.0, "noise norm of the noisy tokens (at least tau)")
    noisy_kind: NoisyKind = param(
        "any", "which tokens can be noisy: any, or only irrelevant / relevant / confusion ones (all of them if fewer)"
    )

    def __post_init__(self) -> None:
        check_choices(self)
        _check(self)

    @property
    def confusion(self) -> float:
        """alpha#, resolved from alpha_confusion or confusion_ratio."""
        if self.alpha_confusion is not None:
            return self.alpha_confusion
        return self.confusion_ratio * self.alpha_star

    @property
    def fixed_counts(self) -> tuple[int, int]:
        """(label-relevant, confusion) tokens per sample under ``counts="fixed"``."""
        return round(self.alpha_star * self.n_tokens), round(self.confusion * self.n_tokens)

    @property
    def effective_alpha_star(self) -> float:
        """The label-relevant fraction samples really have: fixed counts round it (small L moves
        it); binomial and premised counts keep only some draws, which raises their mean (exactly:
        binomial_kept)."""
        if self.counts == "fixed":
            return self.fixed_counts[0] / self.n_tokens
        return binomial_kept(self.n_tokens, self.alpha_star, self.confusion, self.counts)[1] / self.n_tokens


@lru_cache(maxsize=256)
def binomial_kept(L: int, alpha_star: float, confusion: float, counts: Counts) -> tuple[float, float]:
    """(P(kept), E[n_rel | kept]) for n_rel ~ Bin(L, alpha*), n_conf | n_rel ~ Bin(L - n_rel,
    alpha# / (1 - alpha*)) and kept by ``kept_counts``: the share of draws a reading keeps, and the
    mean count of label-relevant tokens its samples have (layout._counts redraws the rest)."""

    def log_pmf(k: int, n: int, p: float) -> float:
        if p <= 0:
            return 0.0 if k == 0 else -math.inf
        log_choose = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
        return log_choose + k * math.log(p) + (n - k) * math.log1p(-p)

    p_conf = confusion / (1 - alpha_star)
    weight = [
        math.exp(log_pmf(r, L, alpha_star))
        * sum(math.exp(log_pmf(c, L - r, p_conf)) for c in range(min(r, L - r + 1)) if kept_counts(counts, r, c))
        for r in range(L + 1)
    ]  # P(n_rel = r and kept)
    kept = sum(weight)
    return kept, (sum(r * w for r, w in enumerate(weight)) / kept if kept else math.nan)


def _check(cfg: TokenDataConfig) -> None:
    """Raise ConfigError naming the field, its value and what is allowed."""

    def fail(field: str, value: object, allowed: str) -> None:
        raise ConfigError(field, value, allowed)

    for field in ("dim", "n_patterns", "n_tokens"):
        if getattr(cfg, field) < 1:
            fail(field, getattr(cfg, field), "must be a positive integer")
    if not 0 < cfg.alpha_star < 1:
        fail("alpha_star", cfg.alpha_star, "must lie in (0, 1)")
    conf = cfg.confusion
    if not 0 <= conf < cfg.alpha_star:
        fail("alpha_confusion", conf, f"must lie in [0, alpha_star={cfg.alpha_star})")
    if cfg.alpha_star + conf > 1:
        fail("alpha_confusion", conf, f"alpha_star + alpha_confusion must be <= 1 (alpha_star={cfg.alpha_star})")
    if cfg.tau < 0:
        fail("tau", cfg.tau, "must be >= 0")
    if cfg.counts == "fixed":
        n_rel, n_conf = cfg.fixed_counts
        if n_rel < 1:
            fail("alpha_star", cfg.alpha_star, f"rounds to 0 label-relevant tokens of n_tokens={cfg.n_tokens}")
        if n_conf >= n_rel:
            fail(
                "alpha_confusion",
                conf,
                f"rounds to {n_conf} confusion tokens, not fewer than the {n_rel} label-relevant ones",
            )
    if cfg.counts != "fixed" and (kept := binomial_kept(cfg.n_tokens, cfg.alpha_star, conf, cfg.counts)[0]) < MIN_KEPT:
        at = f"alpha_star={cfg.alpha_star}, n_tokens={cfg.n_tokens}"
        fail("counts", cfg.counts, f"keeps {kept:.1e} of the draws at {at} (needs >= {MIN_KEPT:g})")
    irrelevant = cfg.n_tokens * (1 - cfg.alpha_star - conf) > 0.5 or cfg.counts != "fixed"
    if irrelevant and cfg.n_patterns < 3:
        fail("n_patterns", cfg.n_patterns, "needs >= 3 (2 discriminative + label-irrelevant ones)")
    if cfg.n_patterns < 2:
        fail("n_patterns", cfg.n_patterns, "needs >= 2 discriminative patterns")
    if cfg.patterns == "orthonormal" and cfg.dim < cfg.n_patterns:
        fail("dim", cfg.dim, f"orthonormal patterns need dim >= n_patterns={cfg.n_patterns}")
    if not 0 <= cfg.noisy_fraction <= 1:
        fail("noisy_fraction", cfg.noisy_fraction, "must lie in [0, 1]")
    if cfg.noisy_fraction > 0 and cfg.tau_big < cfg.tau:
        fail("tau_big", cfg.tau_big, f"must be >= tau={cfg.tau} (noisy tokens carry the larger noise)")
    if cfg.sparsify == "all" and cfg.sparsify_k != 0:
        fail("sparsify_k", cfg.sparsify_k, "must be 0 when sparsify='all'")
    if not 0 <= cfg.sparsify_k < cfg.n_tokens:
        fail("sparsify_k", cfg.sparsify_k, f"must lie in [0, n_tokens={cfg.n_tokens})")


@dataclass(frozen=True)
class ModelConfig:
    """Architecture and initialisation of one model of a pack."""

    kind: str = param("vit", kinds_help(), choices=KINDS)  # declared in vit_core.li2023.kinds
    width: int = param(32, "m, the width of the ReLU layer")
    attn_dim: int | None = param(None, "m_a, rows of W_Q and W_K (default: the token dimension)")
    output_matrix: bool = param(
        True, "eq. (1)'s trained W_O (width x value_dim) between W_V and the ReLU; false: W_V feeds the ReLU directly"
    )
    value_dim: int | None = param(None, "m_b, rows of W_V with output_matrix (default: width)")
    readout: Literal["shared", "per_token"] = param(
        "shared",
        "the fixed readouts a_(l) in {+-1/sqrt(m)}^m of eq. (1): shared, one a for every token; per_token, one drawn "
        "for each token position l (at m = 32 no seed reached zero test error: docs/science-choices.md)",
    )
    init: Literal["random", "aligned"] = param(
        "aligned", "random, or aligned with the patterns (the theory's initial model)"
    )
    qk_gain: float = param(1.0, "scale of W_Q and W_K at initialisation")
    v_gain: float = param(1.0, "scale of W_V at initialisation")
    init_error: float = param(0.1, "aligned init: scale of the Gaussian error added to each matrix")

    def __post_init__(self) -> None:
        check_choices(self)
        for field in ("width", "attn_dim", "value_dim"):
            value = getattr(self, field)
            if value is not None and value < 1:
                raise ConfigError(field, value, "must be a positive integer")
        for field in ("qk_gain", "v_gain", "init_error"):
            if getattr(self, field) < 0:
                raise ConfigError(field, getattr(self, field), "must be >= 0")
        if self.value_dim is not None and not self.output_matrix:
            raise ConfigError("value_dim", self.value_dim, "only used with output_matrix=true")

    def v_rows(self) -> int:
        """Rows of W_V: m_b with an output matrix, else the width m."""
        return (self.value_dim or self.width) if self.output_matrix else self.width

    @property
    def declared(self) -> Kind:
        """What the kind's network has (attention, its class): its declaration in vit_core.li2023.kinds."""
        return KINDS[self.kind]


def check_fits_data(cfg: ModelConfig, dim: int, n_patterns: int) -> None:
    """Raise ConfigError where the model cannot be built for data of this dimension and pattern
    count: the aligned init embeds the M patterns, so it needs M rows in W_Q, W_K and W_V."""
    if cfg.init != "aligned":
        return
    rows = {"attn_dim": cfg.attn_dim or dim} if cfg.declared.attention else {}
    rows["value_dim" if cfg.output_matrix and cfg.value_dim is not None else "width"] = cfg.v_rows()
    for field, value in rows.items():
        if value < n_patterns:
            raise ConfigError(field, value, f"the aligned init needs at least n_patterns={n_patterns} (or init=random)")
