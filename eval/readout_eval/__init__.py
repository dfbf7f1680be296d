"""Task evaluation of an artifact against gold data, with frozen split roles (readout-contract 0x0A).

`readout-export evaluate` and `calibrate` are thin over this package. Rows (`data`) carry the family's
input fields plus gold fields; the family's output object (`Family.task`) picks the task (`tasks`), whose
metrics match that object; `slices` groups cases, `gates` decides, `paired` compares a candidate with its
parent on the same case ids, `lineage` keeps each data file's role, `calibrators` fits the calibration
layer and `calibrate` writes the calibrated artifact, and `report` writes JSON, text and JUnit. It needs the ``eval`` extra (scikit-learn, scipy, pytrec_eval,
matplotlib); the base SDK never imports it.
"""
# public modules (docs/reference/api.md); calibrators, measures and plots are internal
__all__ = ["calibrate", "data", "gates", "lineage", "paired", "report", "run", "slices", "tasks"]
