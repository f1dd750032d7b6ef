"""Paper A's model kinds: what each one's network has (each one's pack class: vit_core.li2023.models.PACKS).

``ModelConfig.kind`` is one of KINDS (its help and allowed values are read from here). The init
and the initial errors (vit_core.li2023.models), the aligned init's checks (configs.check_fits_data)
and a sample's cost (vit_core.li2023.family) ask the kind's declaration what it has, never its
name; the attention mass is recorded for any pack whose forward returns an attention map. A new
kind is one entry here (or ``KINDS[name] = Kind(...)`` elsewhere, as a test does) and its class in
models.PACKS, by value. No torch here: a spec is validated without it.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One kind of eq. (1)'s network. ``attention``: a self-attention layer mixes the tokens before
    the perceptron, so the model has W_Q and W_K (m_a rows each, which the aligned init fills with
    the patterns), the initial error delta and an attention cost a sample; without it, each token
    goes through the perceptron alone. Every kind has W_V (and W_O with ``output_matrix``)."""

    help: str  # what the kind is, in ModelConfig.kind's help
    attention: bool

    def attention_cost(self, n_tokens: int, dim: int) -> int:
        """Multiply-adds of the attention on one sample: its query side L·d·d and its scores and
        mixing 2·L²·d; 0 without attention."""
        L, d = n_tokens, dim
        return L * d * d + 2 * L * L * d if self.attention else 0


KINDS: dict[str, Kind] = {
    "vit": Kind("eq. (1) with attention", attention=True),
    "cnn": Kind("the same network without it", attention=False),
}  # ModelConfig.kind -> its declaration


def kinds_help() -> str:
    """ModelConfig.kind's help: each kind and what it is."""
    return "; ".join(f"{name}: {kind.help}" for name, kind in KINDS.items())
