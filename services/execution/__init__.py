"""The execution layer: the only part of services that imports Ray. ``ray_tune`` runs a sweep's
packs as Ray Tune trials and reads their state; ``jobs`` submits a sweep to a cluster."""
