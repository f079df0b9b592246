"""The study machinery: storages, creating and resuming studies (``study``), a worker's trial loop, grouped
storage writes, trial owners, Ctrl-C and SIGTERM (``interrupt``), what the dashboard shows, the best designs
(``summary``) and progress on a text stream."""
