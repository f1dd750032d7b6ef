"""Paper A's synthetic token data (Li, Wang, Liu, Chen, ICLR 2023, Section 3).

A sample is L tokens in R^d. Each token is one of M patterns plus noise of norm at most tau.
Patterns 0 and 1 are the discriminative ones (one per class); the rest are label-irrelevant.
The label is the majority vote of the discriminative tokens, so a sample's *label-relevant*
tokens (fraction alpha_star on average) carry its own class's pattern and its *confusion*
tokens (fraction alpha_confusion, the paper's alpha#) carry the other one.

Where each token goes (labels, kinds, patterns, noise norms, counts ``fixed`` or ``binomial``) is
drawn by vit_core.li2023.layout with numpy; this module adds the noise directions, with torch. Choices
made here (see docs/science-choices.md):
- token noise: a uniformly random direction in R^d scaled to the layout's norm;
- samples are made in blocks of ``BLOCK`` from per-block streams, so a seed's first N samples
  are the same for every N: a model's training set with N=40 is contained in its set with N=80,
  and the one-pass protocol reads samples [t·B, (t+1)·B) of the same stream at step t without
  making the ones before (``start``);
- the noise directions are drawn with torch (3.5x faster than numpy's normals, which were most of
  the cost of a sample: one-pass training makes B fresh samples per model per step).
"""

from functools import lru_cache

import numpy as np
import torch

from vit_core.li2023.configs import TokenDataConfig
from vit_core.li2023.layout import draw_layout, draw_votes, make_patterns
from vit_core.seeding import Stream, numpy_rng, stream_seed
from vit_core.sparsify import keep_mask
from vit_core.tokens import BLOCK, TokenBatch, TokenKind, blocks_of


@lru_cache(maxsize=16)
def _pattern_rows(cfg: TokenDataConfig, device: torch.device) -> torch.Tensor:
    """The patterns as a contiguous float32 tensor on ``device``, made once per data config: row
    gathers from the transposed array make_patterns returns ran 11x slower (0.43 of a 64-sample
    block's 2.2 ms on a CPU)."""
    return torch.from_numpy(np.ascontiguousarray(make_patterns(cfg), dtype=np.float32)).to(device)


def _sample_block(
    cfg: TokenDataConfig, patterns: torch.Tensor, n: int, rng: np.random.Generator, gen: torch.Generator
) -> TokenBatch:
    """n samples from one block's random streams: numpy for the discrete choices (n·L numbers), the
    torch generator ``gen`` for the noise (n·L·d), made on ``gen``'s device with the tokens."""
    device = gen.device
    layout = draw_layout(cfg, n, rng)
    labels, kinds, noise_norm = layout.labels, layout.kinds, layout.noise_norm
    norm = torch.from_numpy(noise_norm.astype(np.float32)).to(device)
    # a uniform direction, scaled to the layout's norm, plus the pattern
    tokens = torch.randn((n, cfg.n_tokens, cfg.dim), generator=gen, device=device)
    tokens *= (norm / torch.linalg.vector_norm(tokens, dim=-1)).unsqueeze(-1)
    tokens += patterns.index_select(0, torch.from_numpy(layout.pattern_index).view(-1).to(device)).view(
        tokens.shape
    )  # 3.5x faster than patterns[index]
    keep = keep_mask(kinds, noise_norm, cfg.sparsify, cfg.sparsify_k, rng)
    return TokenBatch(
        tokens=tokens,
        labels=torch.from_numpy(labels.astype(np.float32)).to(device),
        kinds=torch.from_numpy(kinds).to(device),
        noise_norm=norm,
        keep=torch.from_numpy(keep).to(device),
    )


def sample_tokens(
    cfg: TokenDataConfig,
    n: int,
    seed: int,
    stream: Stream = Stream.TRAIN_DATA,
    start: int = 0,
    device: str | torch.device = "cpu",
) -> TokenBatch:
    """Samples [start, start + n) of (seed, stream): the same samples whatever n and start, made on
    ``device``. Off the CPU the noise comes from that device's generator (CUDA: Philox), so its
    samples are other draws of the same distribution: labels, kinds, patterns and noise norms
    are the host's, the noise directions are not, and the tokens never cross from the host.
    A single block is returned as a view, not copied (a one-pass chunk at B = 1 is one block:
    the copy was 18% of a CNN's one-pass step)."""
    device = torch.device(device)
    patterns = _pattern_rows(cfg, device)
    numbers, within = blocks_of(n, start)
    blocks = [
        _sample_block(
            cfg,
            patterns,
            BLOCK,
            numpy_rng(seed, stream, b),
            torch.Generator(device=device).manual_seed(stream_seed(seed, stream, b)),
        )
        for b in numbers
    ]
    fields = zip(*(vars(b).values() for b in blocks))
    return TokenBatch(*((torch.cat(parts) if len(parts) > 1 else parts[0])[within] for parts in fields))


def vote_counts(cfg: TokenDataConfig, n: int, seed: int, stream: Stream) -> tuple[np.ndarray, np.ndarray]:
    """(label-relevant, confusion) tokens among those each of the first n samples of (seed, stream)
    keeps, (n,) each. Without sparsification read from each block's first draws (layout.draw_votes)
    alone: no token is made."""
    if cfg.sparsify_k:
        batch = sample_tokens(cfg, n, seed, stream)
        kept = {kind: ((batch.kinds == kind) & batch.keep).sum(1).numpy() for kind in TokenKind}
        return kept[TokenKind.RELEVANT], kept[TokenKind.CONFUSION]
    blocks, within = blocks_of(n, 0)
    votes = [draw_votes(cfg, BLOCK, numpy_rng(seed, stream, b)) for b in blocks]
    return tuple(np.concatenate([v[i] for v in votes])[within] for i in (1, 2))
