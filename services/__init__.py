"""vitsweep's service layer: the command line now; sweeps on Ray Tune with MLflow tracking next.

Depends on vit_core; vit_core never imports from here.
"""
