"""vitsweep's service layer: sweep specs (spec), their execution on Ray Tune (sweep), MLflow
tracking (tracking) and the command line (cli). Depends on vit_core; vit_core never imports it.

Importing any part of it applies the process-wide settings first (services.process): Ray and MLflow
read some of them at import, and every submodule that imports them is imported after this file."""

from services import process  # noqa: F401
