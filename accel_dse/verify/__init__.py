"""Multi-fidelity verification: RTL-simulate and synthesise the best designs of a sweep study.

:func:`verify_top` picks the top-K feasible designs of a study (Pareto set first), runs each on
the study's workload in RTL simulation (``accel_dse.simulate``, ops scaled by ``scale``) and
through Yosys (``rtl_gen.synth_stats``), and records pass/fail, RTL vs model cycles and the
synthesis figures in the study, where ``accel-dse report`` shows them (failures loudly). With
``share=True`` several verifiers split the top K through the study's storage
(:mod:`accel_dse.verify._claims`).
"""

from __future__ import annotations

from accel_dse.verify._claims import CLAIM_TTL_S, Claims
from accel_dse.verify._run import DEFAULT_SCALE, DEFAULT_SIMULATOR, DEFAULT_TIMEOUT_S, VerifyResult, verify_top

__all__ = ["verify_top", "VerifyResult", "Claims", "CLAIM_TTL_S", "DEFAULT_SCALE", "DEFAULT_SIMULATOR",
           "DEFAULT_TIMEOUT_S"]
