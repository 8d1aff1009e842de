"""Many ranks of one job: per-rank analysis as independent tasks (a local process pool or a
Dask cluster), small picklable summaries, and the straggler table built from them."""
