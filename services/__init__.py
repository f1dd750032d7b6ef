"""vitsweep's service layer: sweep specs (spec), their execution on Ray Tune (sweep), MLflow
tracking (tracking) and the command line (cli). Depends on vit_core; vit_core never imports it."""
