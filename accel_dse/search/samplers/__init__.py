"""The sweep's samplers: the registry by name (``registry``), the base of the sweep's own samplers
(``design_sampler``), the wrapper that never repeats a design (``distinct``), Bayesian optimisation
(``bo`` with ``gp`` and ``bo_encoding``), penalised CMA-ES (``cmaes``) and the JAX policy-gradient agent (``rl``)."""
