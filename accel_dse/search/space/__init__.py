"""The space searched and how it is measured: metric and objective names (``metrics``), the parameters,
workloads and objectives (``design_space``), design-space files (``space_file``) and what a trial carries
and how trials compare (``trial_values``: flat values, the constraints' penalty, the Pareto mask)."""
