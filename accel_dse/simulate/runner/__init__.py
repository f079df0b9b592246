"""Building and running a simulator: discovery (``tools``), the build cache (``build``, bounded by
``cache_bound``), one cocotb run in its own process group (``launch``, through the ``child`` launcher;
``process``), and the expected duration of a run (``eta``)."""
