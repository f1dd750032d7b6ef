"""Paper B (Jelassi, Sander, Li, NeurIPS 2022): its spatially structured data (spatial), its models
(positional attention and the vanilla variant: positional; Theorem 3.1's linear class: linear),
their configs (configs), transfer's pre-training (pretrain) and the families that tie them to
vitsweep (family). Nothing is imported here: each module loads on its own."""
