"""Silent data corruption: the fault places and the fault-injection campaign of the checksum
option (``ArrayConfig.checksum``). ``accel_dse.sdc.campaign`` simulates (it imports ``rtl_gen``
and JAX when it runs); this package's top imports nothing heavy."""

from __future__ import annotations

from accel_dse.sdc.places import FAULT_KINDS, MAX_FAULTS_PER_PLACE, PLACES, Place

__all__ = ["PLACES", "Place", "FAULT_KINDS", "MAX_FAULTS_PER_PLACE"]
